num_gpus = 8


class Schedule:
    epochs = 24
