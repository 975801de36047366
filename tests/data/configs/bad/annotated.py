num_gpus: int = 8
