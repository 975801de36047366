# Subscripts and slices with Python's semantics (negative indexes, steps, strings).
sizes = [10, 20, 30, 40, 50]
last = sizes[-1]
middle = sizes[1:4]
every_other = sizes[::2]
backwards = sizes[::-1]
tail_reversed = sizes[-2::-2]
name = 'stream_petr'
prefix = name[:6]
reversed_name = name[::-1]
cfg = dict(a=dict(b=[1, 2, 3]))
deep = cfg['a']['b'][-2]
pair = (1, 2, 3)[1:]
