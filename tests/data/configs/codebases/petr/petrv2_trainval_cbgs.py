# SYNTHETIC: petrsim's own config in the shape of PETRv2's trainval + CBGS configs (megvii-research/PETR@f7525f93
# projects/configs/petrv2/*_trainval_cbgs.py): PETR's CustomNuScenesDataset (no sequence keys: one
# group, the whole-dataset pool) inside CBGSDataset, train+val as an ann_file list, mmdet3d's train
# script (EpochBasedRunner from total_epochs... here written as a runner), and an unused import.
import os.path as osp
_base_ = [
    '../../_base_/datasets/nus-3d.py',
    '../../_base_/default_runtime.py',
]
backbone_norm_cfg = dict(type='LN', requires_grad=True)
plugin = True
plugin_dir = 'projects/mmdet3d_plugin/'
point_cloud_range = [-51.2, -51.2, -5.0, 51.2, 51.2, 3.0]
voxel_size = [0.2, 0.2, 8]
img_norm_cfg = dict(mean=[103.530, 116.280, 123.675], std=[57.375, 57.120, 58.395], to_rgb=False)
class_names = [
    'car', 'truck', 'construction_vehicle', 'bus', 'trailer', 'barrier',
    'motorcycle', 'bicycle', 'pedestrian', 'traffic_cone'
]
input_modality = dict(use_lidar=False, use_camera=True, use_radar=False, use_map=False, use_external=True)
model = dict(
    type='Petr3D',
    use_grid_mask=True,
    pts_bbox_head=dict(
        type='PETRv2Head',
        num_classes=10,
        in_channels=256,
        num_query=900,
        position_range=[-61.2, -61.2, -10.0, 61.2, 61.2, 10.0],
        transformer=dict(type='PETRTransformer',
                         decoder=dict(type='PETRTransformerDecoder', return_intermediate=True, num_layers=6)),
        bbox_coder=dict(type='NMSFreeCoder', post_center_range=[-61.2, -61.2, -10.0, 61.2, 61.2, 10.0],
                        pc_range=point_cloud_range, max_num=300, voxel_size=voxel_size[:2],
                        num_classes=len(class_names)),
    ),
    train_cfg=dict(pts=dict(grid_size=[512, 512, 1], voxel_size=voxel_size, point_cloud_range=point_cloud_range,
                            out_size_factor=4)))
dataset_type = 'CustomNuScenesDataset'
data_root = '/data/Dataset/nuScenes/'
file_client_args = dict(backend='disk')
ida_aug_conf = {
    "resize_lim": (0.94, 1.25),
    "final_dim": (640, 1600),
    "bot_pct_lim": (0.0, 0.0),
    "rot_lim": (0.0, 0.0),
    "H": 900,
    "W": 1600,
    "rand_flip": True,
}
train_pipeline = [
    dict(type='LoadMultiViewImageFromFiles', to_float32=True),
    dict(type='LoadMultiViewImageFromMultiSweepsFiles', sweeps_num=1, to_float32=True, pad_empty_sweeps=True,
         test_mode=False, sweep_range=[3, 27]),
    dict(type='LoadAnnotations3D', with_bbox_3d=True, with_label_3d=True, with_attr_label=False),
    dict(type='ObjectRangeFilter', point_cloud_range=point_cloud_range),
    dict(type='ObjectNameFilter', classes=class_names),
    dict(type='ResizeCropFlipImage', data_aug_conf=ida_aug_conf, training=True),
    dict(type='GlobalRotScaleTransImage', rot_range=[-0.3925, 0.3925], translation_std=[0, 0, 0],
         scale_ratio_range=[0.95, 1.05], reverse_angle=True, training=True),
    dict(type='NormalizeMultiviewImage', **img_norm_cfg),
    dict(type='PadMultiViewImage', size_divisor=32),
    dict(type='DefaultFormatBundle3D', class_names=class_names),
    dict(type='Collect3D', keys=['gt_bboxes_3d', 'gt_labels_3d', 'img'])
]
data = dict(
    samples_per_gpu=1,
    workers_per_gpu=4,
    train=dict(
        type='CBGSDataset',
        dataset=dict(
            type=dataset_type,
            data_root=data_root,
            ann_file=[data_root + 'mmdet3d_nuscenes_30f_infos_train.pkl',
                      data_root + 'mmdet3d_nuscenes_30f_infos_val.pkl'],
            pipeline=train_pipeline,
            classes=class_names,
            modality=input_modality,
            test_mode=False,
            use_valid_flag=True,
            box_type_3d='LiDAR')),
)
optimizer = dict(type='AdamW', lr=2e-4, weight_decay=0.01)
total_epochs = 24
evaluation = dict(interval=24)
find_unused_parameters = False
runner = dict(type='EpochBasedRunner', max_epochs=total_epochs)
