data = dict(
    samples_per_gpu=2,
    train=dict(type='CustomNuScenesDataset']
