sizes = [1, 2, 3]
total = dict(x for x in sizes)
