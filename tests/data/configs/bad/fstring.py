name = 'stream_petr'
work_dir = f'./work_dirs/{name}'
