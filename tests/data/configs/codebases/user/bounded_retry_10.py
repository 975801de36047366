# SYNTHETIC (petrsim's own test fixture, not upstream code): The bounded retry loop of user/projects/mmdet3d_plugin/datasets/my_datasets.py with max_refetch set in the
# dataset dict: at most 11 loads.
_base_ = ['../../streampetr/stream_petr_r50_704_bs2_seq_24e.py']
data = dict(train=dict(type='BoundedRetryDataset', filter_empty_gt=True, max_refetch=10))
