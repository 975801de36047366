num_gpus = 8
if num_gpus > 4:
    batch_size = 2
