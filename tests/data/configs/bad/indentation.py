num_gpus = 8
    batch_size = 2
