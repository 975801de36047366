# two names at once
num_gpus, batch_size = 8, 2
