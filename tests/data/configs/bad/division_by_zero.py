num_gpus = 0
batch_size = 2
num_iters_per_epoch = 28130 // (num_gpus * batch_size)
