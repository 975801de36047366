num_gpus = 8
batch_size = 2 if num_gpus == 8 else 1
