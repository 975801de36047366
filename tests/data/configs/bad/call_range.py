# gpu_ids is printed as range(0, 8) in logs, but a config file may not call range.
num_gpus = 8
gpu_ids = range(0, num_gpus)
