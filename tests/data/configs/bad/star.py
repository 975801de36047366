collect_keys = ['lidar2img', 'intrinsics']
keys = [*collect_keys, 'img']
