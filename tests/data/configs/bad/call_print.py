num_gpus = 8
print(num_gpus)
