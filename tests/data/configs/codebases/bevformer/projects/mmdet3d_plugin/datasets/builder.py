# SYNTHETIC: petrsim's own stand-in for BEVFormer's data loader builder (fundamentalvision/BEVFormer@66b65f3a
# projects/mmdet3d_plugin/datasets/builder.py): the config's shuffler_sampler, no infinite sampler.
def build_dataloader(dataset, samples_per_gpu, workers_per_gpu, num_gpus=1, dist=True, shuffle=True, seed=None,
                     shuffler_sampler=None, nonshuffler_sampler=None, **kwargs):
    return shuffler_sampler if shuffler_sampler is not None else dict(type='DistributedGroupSampler')
