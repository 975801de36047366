num_gpus = 8
num_gpus * 2
