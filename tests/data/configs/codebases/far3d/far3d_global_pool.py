# SYNTHETIC: petrsim's own config in the shape of Far3D's (megvii-research/Far3D@5efb9d73 projects/configs/far3d.py):
# Argoverse2DatasetT in sequence mode with filter_empty_gt at its default (True), whose _rand_another
# draws from the whole dataset, so a chunk without GT cannot trap the loader. The class names are the
# real config's (far3d.py:15-20, Argoverse 2's 26 competition categories), and petrsim's tests read
# it over Argoverse 2 infos in Far3D's shapes (tests/data/importers/mini_av2_infos_train.pkl); a
# subscript reads the depth net's stride as the real file does.
_base_ = ['../../_base_/default_runtime.py']
plugin = True
plugin_dir = 'projects/mmdet3d_plugin/'
num_gpus = 8
batch_size = 1
num_iters_per_epoch = 110071 // (num_gpus * batch_size)
num_epochs = 6
queue_length = 1
num_frame_losses = 1
point_cloud_range = [-152.4, -152.4, -5.0, 152.4, 152.4, 5.0]
class_names = ['ARTICULATED_BUS', 'BICYCLE', 'BICYCLIST', 'BOLLARD', 'BOX_TRUCK', 'BUS',
               'CONSTRUCTION_BARREL', 'CONSTRUCTION_CONE', 'DOG', 'LARGE_VEHICLE',
               'MESSAGE_BOARD_TRAILER', 'MOBILE_PEDESTRIAN_CROSSING_SIGN', 'MOTORCYCLE',
               'MOTORCYCLIST', 'PEDESTRIAN', 'REGULAR_VEHICLE', 'SCHOOL_BUS', 'SIGN',
               'STOP_SIGN', 'STROLLER', 'TRUCK', 'TRUCK_CAB', 'VEHICULAR_TRAILER',
               'WHEELCHAIR', 'WHEELED_DEVICE', 'WHEELED_RIDER']
collect_keys = ['lidar2img', 'intrinsics', 'extrinsics', 'timestamp', 'img_timestamp', 'ego_pose', 'ego_pose_inv']
depthnet_config = {'type': 0, 'hidden_dim': 256, 'num_depth_bins': 50, 'depth_min': 1e-1, 'depth_max': 110,
                   'stride': 16}
model = dict(
    type='Far3D',
    num_frame_head_grads=num_frame_losses,
    num_frame_backbone_grads=num_frame_losses,
    num_frame_losses=num_frame_losses,
    use_grid_mask=True,
    stride=[8, 16, 32, 64],
    pts_bbox_head=dict(type='FarHead', num_classes=len(class_names), in_channels=256,
                       depth_stride=depthnet_config['stride'],
                       transformer=dict(type='Detr3DTransformer',
                                        decoder=dict(type='Detr3DTransformerDecoder', num_layers=6))))
dataset_type = 'Argoverse2DatasetT'
data_root = './data/av2/'
ida_aug_conf = {"resize_lim": (0.47, 0.55), "final_dim": (640, 960), "final_dim_f": (640, 720),
                "bot_pct_lim": (0.0, 0.0), "rot_lim": (0.0, 0.0), "H": 2048, "W": 1550, "rand_flip": False}
train_pipeline = [
    dict(type='AV2LoadMultiViewImageFromFiles', to_float32=True),
    dict(type='LoadAnnotations3D', with_bbox_3d=True, with_label_3d=True, with_bbox=True, with_label=True,
         with_bbox_depth=True),
    dict(type='ObjectRangeFilter', point_cloud_range=point_cloud_range),
    dict(type='ObjectNameFilter', classes=class_names),
    dict(type='AV2ResizeCropFlipRotImageV2', data_aug_conf=ida_aug_conf),
    dict(type='AV2PadMultiViewImage', size_divisor=32),
    dict(type='PETRFormatBundle3D', class_names=class_names, collect_keys=collect_keys + ['prev_exists']),
    dict(type='Collect3D', keys=['gt_bboxes_3d', 'gt_labels_3d', 'img'] + collect_keys)
]
data = dict(
    samples_per_gpu=batch_size,
    workers_per_gpu=4,
    train=dict(
        type=dataset_type,
        data_root=data_root,
        ann_file=data_root + 'av2_train_infos_mini.pkl',
        split='train',
        load_interval=1,
        num_frame_losses=num_frame_losses,
        seq_split_num=2,
        seq_mode=True,
        interval_test=True,
        pipeline=train_pipeline,
        classes=class_names,
        collect_keys=collect_keys + ['img', 'prev_exists', 'img_metas'],
        queue_length=queue_length,
        test_mode=False,
        use_valid_flag=False,
        box_type_3d='LiDAR'),
    shuffler_sampler=dict(type='InfiniteGroupEachSampleInBatchSampler'),
    nonshuffler_sampler=dict(type='DistributedSampler')
)
optimizer = dict(type='AdamW', lr=2e-4, weight_decay=0.01)
runner = dict(type='IterBasedRunner', max_iters=num_epochs * num_iters_per_epoch)
evaluation = dict(interval=num_iters_per_epoch * num_epochs)
