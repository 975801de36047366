# str.format, f-strings, str methods.
num_gpus = 8
lr = 0.0002
work_dir = './work_dirs/{}_{}gpus'.format('petr', num_gpus)
named = '{name}-{0:04d}'.format(7, name='ckpt')
spec = '{:.2f}|{:>6}|{:<4}|{:^7}|{:+d}|{:,}'.format(3.14159, 'ab', 'c', 'mid', 5, 1234567)
fstring = f'{num_gpus}x{lr:.1e}'
nested = f'{"x"!r} {num_gpus:{3}d} {lr!s}'
percent = f'{0.25:.1%}'
joined = '/'.join(['data', 'nuscenes'])
parts = 'a,b,,c'.split(',')
upper = 'abc'.upper()
replaced = 'a-b-c'.replace('-', '_', 1)
checks = ['stream.py'.endswith('.py'), 'stream.py'.startswith(('x', 's'))]
