# SYNTHETIC: petrsim's own stand-in for Sparse4D's data loader builder (linxuewu/Sparse4D@db711ad5
# projects/mmdet3d_plugin/datasets/builder.py): it takes a shuffler_sampler parameter, but its train loop
# never passes the config's; the runner's type picks InfiniteGroupEachSampleInBatchSampler.
def build_dataloader(
    dataset,
    samples_per_gpu,
    workers_per_gpu,
    num_gpus=1,
    dist=True,
    shuffle=True,
    seed=None,
    shuffler_sampler=None,
    nonshuffler_sampler=None,
    runner_type="EpochBasedRunner",
    **kwargs
):
    if runner_type == "IterBasedRunner":
        return "InfiniteGroupEachSampleInBatchSampler"
    return "DistributedGroupSampler"
