data_root = './data/nuscenes/'
ann_file = data_root + 1
