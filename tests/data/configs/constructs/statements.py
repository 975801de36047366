# Module-level statements petrsim evaluates: if with a known test, for over a known list,
# augmented and annotated assignments, tuple unpacking, subscript assignment, list methods.
mode = 'train'
if mode == 'train':
    samples = 2
elif mode == 'val':
    samples = 1
else:
    samples = 0
total = 0
for i in range(4):
    total += i
a, (b, *rest) = 1, (2, 3, 4)
epochs: int = 24
model = dict(backbone=dict(depth=50))
model['backbone']['depth'] = 101
pipeline = [dict(type='Load')]
pipeline.append(dict(type='Collect'))


def helper(x):
    return x


class Thing:
    pass
