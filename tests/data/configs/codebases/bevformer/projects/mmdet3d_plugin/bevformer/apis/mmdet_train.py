# SYNTHETIC: petrsim's own stand-in for BEVFormer's train loop (fundamentalvision/BEVFormer@66b65f3a
# projects/mmdet3d_plugin/bevformer/apis/mmdet_train.py): it passes the config's sampler keys on, and
# builds an epoch runner from total_epochs when the config has no runner.
from projects.mmdet3d_plugin.datasets.builder import build_dataloader


def custom_train_detector(model, dataset, cfg, distributed=False):
    loaders = [
        build_dataloader(ds, cfg.data.samples_per_gpu, cfg.data.workers_per_gpu, len(cfg.gpu_ids),
                         dist=distributed, seed=cfg.seed,
                         shuffler_sampler=cfg.data.shuffler_sampler,
                         nonshuffler_sampler=cfg.data.nonshuffler_sampler)
        for ds in dataset
    ]
    if 'runner' not in cfg:
        cfg.runner = {'type': 'EpochBasedRunner', 'max_epochs': cfg.total_epochs}
    return loaders
