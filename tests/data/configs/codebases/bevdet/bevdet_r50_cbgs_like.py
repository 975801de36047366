# SYNTHETIC: petrsim's own config in the shape of BEVDet's (HuangJunJie2017/BEVDet@1bacecb0 configs/bevdet/bevdet-r50.py):
# mmdet3d's NuScenesDataset (one group, the whole-dataset pool) inside CBGSDataset, grid settings read
# through subscripts and slices, total_epochs without a runner (mmdet3d's train script makes it an
# EpochBasedRunner).
_base_ = ['../../_base_/datasets/nus-3d.py', '../../_base_/default_runtime.py']
class_names = [
    'car', 'truck', 'construction_vehicle', 'bus', 'trailer', 'barrier',
    'motorcycle', 'bicycle', 'pedestrian', 'traffic_cone'
]
data_config = {
    'cams': ['CAM_FRONT_LEFT', 'CAM_FRONT', 'CAM_FRONT_RIGHT', 'CAM_BACK_LEFT', 'CAM_BACK', 'CAM_BACK_RIGHT'],
    'Ncams': 6,
    'input_size': (256, 704),
    'src_size': (900, 1600),
    'resize': (-0.06, 0.11),
    'rot': (-5.4, 5.4),
    'flip': True,
    'crop_h': (0.0, 0.0),
    'resize_test': 0.04,
}
grid_config = {
    'xbound': [-51.2, 51.2, 0.8],
    'ybound': [-51.2, 51.2, 0.8],
    'zbound': [-10.0, 10.0, 20.0],
    'dbound': [1.0, 60.0, 1.0],
}
voxel_size = [0.1, 0.1, 0.2]
numC_Trans = 64
point_cloud_range = [grid_config['xbound'][0], grid_config['ybound'][0], -5.0,
                     grid_config['xbound'][1], grid_config['ybound'][1], 3.0]
model = dict(
    type='BEVDet',
    img_view_transformer=dict(type='ViewTransformerLiftSplatShoot', grid_config=grid_config, data_config=data_config,
                              numC_Trans=numC_Trans),
    pts_bbox_head=dict(type='CenterHead', in_channels=256,
                       bbox_coder=dict(type='CenterPointBBoxCoder', pc_range=point_cloud_range[:2],
                                       voxel_size=voxel_size[:2], code_size=9)),
    train_cfg=dict(pts=dict(point_cloud_range=point_cloud_range, grid_size=[1024, 1024, 40], voxel_size=voxel_size)))
dataset_type = 'NuScenesDataset'
data_root = 'data/nuscenes/'
file_client_args = dict(backend='disk')
train_pipeline = [
    dict(type='LoadMultiViewImageFromFiles_BEVDet', is_train=True, data_config=data_config),
    dict(type='LoadPointsFromFile', coord_type='LIDAR', load_dim=5, use_dim=5, file_client_args=file_client_args),
    dict(type='GlobalRotScaleTrans', rot_range=[-0.3925, 0.3925], scale_ratio_range=[0.95, 1.05],
         translation_std=[0, 0, 0], update_img2lidar=True),
    dict(type='RandomFlip3D', sync_2d=False, flip_ratio_bev_horizontal=0.5, flip_ratio_bev_vertical=0.5,
         update_img2lidar=True),
    dict(type='ObjectRangeFilter', point_cloud_range=point_cloud_range),
    dict(type='ObjectNameFilter', classes=class_names),
    dict(type='DefaultFormatBundle3D', class_names=class_names),
    dict(type='Collect3D', keys=['img_inputs', 'gt_bboxes_3d', 'gt_labels_3d'])
]
input_modality = dict(use_lidar=False, use_camera=True, use_radar=False, use_map=False, use_external=False)
data = dict(
    samples_per_gpu=8,
    workers_per_gpu=4,
    train=dict(
        type='CBGSDataset',
        dataset=dict(
            type=dataset_type,
            data_root=data_root,
            ann_file=data_root + 'nuscenes_infos_train.pkl',
            pipeline=train_pipeline,
            classes=class_names,
            test_mode=False,
            use_valid_flag=True,
            modality=input_modality,
            img_info_prototype='bevdet',
            box_type_3d='LiDAR')))
optimizer = dict(type='AdamW', lr=2e-4, weight_decay=0.01)
total_epochs = 24
