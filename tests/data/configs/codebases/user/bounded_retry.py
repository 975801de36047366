# SYNTHETIC (petrsim's own test fixture, not upstream code): A user's job whose dataset class gives up after max_refetch redraws (mmengine's pattern), over
# StreamPETR's streaming config with filter_empty_gt left at its default.
_base_ = ['../../streampetr/stream_petr_r50_704_bs2_seq_24e.py']
data = dict(train=dict(type='BoundedRetryDataset', filter_empty_gt=True))
