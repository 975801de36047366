work_dir = './work_dirs/%s' % 'stream_petr'
