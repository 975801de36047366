num_gpus = 8
large = num_gpus >= 8
