# SYNTHETIC: petrsim's own stand-in for Far3D's train loop, byte-identical to StreamPETR's (megvii-research/Far3D@5efb9d73
# projects/mmdet3d_plugin/core/apis/mmdet_train.py): cfg.runner is read while the loaders are built.
from projects.mmdet3d_plugin.datasets.builder import build_dataloader


def custom_train_detector(model, dataset, cfg, distributed=False):
    return [
        build_dataloader(ds, cfg.data.samples_per_gpu, cfg.data.workers_per_gpu, len(cfg.gpu_ids),
                         dist=distributed, seed=cfg.seed, shuffler_sampler=cfg.data.shuffler_sampler,
                         nonshuffler_sampler=cfg.data.nonshuffler_sampler,
                         runner_type=cfg.runner,
                         ) for ds in dataset
    ]
