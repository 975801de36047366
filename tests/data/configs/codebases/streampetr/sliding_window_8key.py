# SYNTHETIC: petrsim's own config in the shape of StreamPETR's sliding-window config (exiawsh/StreamPETR@95f64702
# projects/configs/StreamPETR/stream_petr_r50_flash_704_bs1_8key_2grad_24e.py): no sequence mode (one
# group, the whole-dataset pool), a queue of 8 frames of which the last 2 must have GT, an epoch runner
# with DistributedGroupSampler. Unlike the published file (filter_empty_gt=False, random_length=1) it
# keeps filter_empty_gt at its default and random_length at 0, so the queue check is live and exact.
_base_ = ['../../streampetr/stream_petr_r50_704_bs2_seq_24e.py']
num_gpus = 8
batch_size = 1
num_iters_per_epoch = 28130 // (num_gpus * batch_size)
num_epochs = 24
queue_length = 8
num_frame_losses = 2
data = dict(
    samples_per_gpu=batch_size,
    train=dict(seq_mode=False, seq_split_num=None, queue_length=queue_length, num_frame_losses=num_frame_losses,
               filter_empty_gt=True),
    shuffler_sampler=dict(type='DistributedGroupSampler'),
)
runner = dict(_delete_=True, type='EpochBasedRunner', max_epochs=num_epochs)
evaluation = dict(interval=num_epochs)
