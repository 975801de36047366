# The older form of the job that hung: StreamPETR trained on nuScenes train+val. Two levels of
# _base_ (this file -> the 24e config -> nus-3d.py and default_runtime.py). It replaces data.train
# (_delete_=True) by one whose ann_file lists both info files (mmdet's ConcatDataset, in that
# order) and leaves filter_empty_gt to the dataset's default; it reads the base's values it does
# not recompute through {{_base_.name}}.
_base_ = './stream_petr_r50_704_bs2_seq_24e.py'

# mmcv runs this file on its own: the names of the base are not visible here, so the ones used
# in arithmetic are written again.
num_gpus = 8
batch_size = 2
num_epochs = 24
num_iters_per_epoch = (28130 + 6019) // (num_gpus * batch_size)
data_root = './data/nuscenes/'
info_prefix = 'nuscenes2d_temporal_infos_'

model = dict(
    img_backbone=dict(
        _delete_=True, type='ResNet', depth=50, num_stages=4, out_indices=(2, 3), frozen_stages=-1,
        norm_cfg=dict(type='BN2d', requires_grad=False), norm_eval=True, style='pytorch'),
    pts_bbox_head=dict(transformer=dict(decoder=dict(num_layers=3))))

data = dict(
    workers_per_gpu=6,
    train=dict(
        _delete_=True,
        type='CustomNuScenesDataset',
        data_root=data_root,
        ann_file=[data_root + info_prefix + 'train.pkl',
                  data_root + info_prefix + 'val.pkl'],
        num_frame_losses=1,
        seq_split_num=2,
        seq_mode=True,
        pipeline={{_base_.train_pipeline}},
        classes={{ _base_.class_names }},
        modality={{_base_.input_modality}},
        collect_keys={{_base_.data.train.collect_keys}},
        queue_length=1,
        test_mode=False,
        use_valid_flag=True,
        box_type_3d='LiDAR'))

optimizer = dict(_delete_=True, type='AdamW', lr=2e-4, weight_decay=0.01)
# momentum_config is in no base: mmcv keeps its _delete_ key
momentum_config = dict(_delete_=True, policy='cyclic')
evaluation = dict(interval=num_iters_per_epoch * num_epochs)
checkpoint_config = dict(interval=num_iters_per_epoch)
runner = dict(max_iters=num_epochs * num_iters_per_epoch)
log_config = dict(interval=10)
work_dir = './work_dirs/{{ fileBasenameNoExtension }}/'
