# the closing quote is missing
data_root = './data/nuscenes/
num_gpus = 8
