# list, tuple, dict of pairs, range, zip, enumerate, sorted, reversed, .index.
classes = ['car', 'truck', 'bus']
as_list = list((1, 2))
as_tuple = tuple([1, 2])
from_pairs = dict([('a', 1), ('b', 2)])
from_zip = dict(zip(classes, range(3)))
gpu_ids = list(range(0, 8, 2))
numbered = list(enumerate(classes, 1))
ordered = sorted([3, 1, 2], reverse=True)
backwards = list(reversed(classes))
truck_index = classes.index('truck')
label2cat = {i: name for i, name in enumerate(classes)}
