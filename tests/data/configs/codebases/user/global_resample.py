# SYNTHETIC (petrsim's own test fixture, not upstream code): A user's job: StreamPETR's streaming config (petrsim's own test config) with filter_empty_gt left at
# its default, trained with the user's own dataset class whose _rand_another draws from the whole
# dataset (user/projects/mmdet3d_plugin/datasets/my_datasets.py). petrsim reads the class's source.
_base_ = ['../../streampetr/stream_petr_r50_704_bs2_seq_24e.py']
data = dict(train=dict(type='GlobalResampleDataset', filter_empty_gt=True))
