# Conditional expressions, comparisons, and/or/not, comprehensions with several clauses.
use_flash = True
batch_size = 2
attn = 'FlashMHA' if use_flash else 'MultiheadAttention'
chained = 1 < batch_size <= 2
either = 0 or 'fallback'
both = batch_size and 'second'
negated = not use_flash
member = 'car' in ['car', 'truck']
squares = [i * i for i in range(5) if i % 2 == 0]
pairs = [(i, j) for i in range(3) for j in range(i) if i + j > 1]
mapping = {k: v * 2 for k, v in dict(a=1, b=2).items()}
total = sum(x for x in [1, 2, 3])
none_check = None is None
