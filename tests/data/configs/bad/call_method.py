work_dir = './work_dirs/{}'.format('stream_petr')
