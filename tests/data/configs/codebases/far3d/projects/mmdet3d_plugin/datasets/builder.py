# SYNTHETIC: petrsim's own stand-in for Far3D's data loader builder, byte-identical to StreamPETR's (megvii-research/Far3D@5efb9d73
# projects/mmdet3d_plugin/datasets/builder.py): it reads the config's shuffler_sampler and builds the
# InfiniteGroupEachSampleInBatchSampler for an IterBasedRunner.
from mmdet.datasets.samplers import GroupSampler


def build_dataloader(dataset, samples_per_gpu, workers_per_gpu, num_gpus=1, dist=True, shuffle=True, seed=None,
                     shuffler_sampler=None, nonshuffler_sampler=None, runner_type=dict(type='EpochBasedRunner'),
                     **kwargs):
    sampler_cfg = shuffler_sampler if shuffler_sampler is not None else dict(type='DistributedGroupSampler')
    if runner_type['type'] == 'IterBasedRunner' and sampler_cfg['type'] == 'InfiniteGroupEachSampleInBatchSampler':
        return 'a batch sampler'
    return GroupSampler(dataset, samples_per_gpu)
