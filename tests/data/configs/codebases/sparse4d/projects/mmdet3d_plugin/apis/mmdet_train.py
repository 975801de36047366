# SYNTHETIC: petrsim's own stand-in for Sparse4D's train loop (linxuewu/Sparse4D@db711ad5
# projects/mmdet3d_plugin/apis/mmdet_train.py): the runner's type picks the sampler; the config's
# shuffler_sampler is never passed on.
from projects.mmdet3d_plugin.datasets.builder import build_dataloader


def custom_train_detector(model, dataset, cfg, distributed=False):
    runner_type = cfg.runner["type"] if "runner" in cfg else "EpochBasedRunner"
    return [
        build_dataloader(ds, cfg.data.samples_per_gpu, cfg.data.workers_per_gpu, num_gpus=len(cfg.gpu_ids),
                         dist=distributed, seed=cfg.seed, nonshuffler_sampler=dict(type="DistributedSampler"),
                         runner_type=runner_type)
        for ds in dataset
    ]
