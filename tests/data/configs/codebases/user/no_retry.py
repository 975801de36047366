# SYNTHETIC (petrsim's own test fixture, not upstream code): A user's job whose dataset class has no retry loop (user/projects/mmdet3d_plugin/datasets/my_datasets.py):
# a frame without GT makes the DataLoader's collate fail, so the job stops; it does not hang.
_base_ = ['../../streampetr/stream_petr_r50_704_bs2_seq_24e.py']
data = dict(train=dict(type='NoRetryDataset', filter_empty_gt=True))
