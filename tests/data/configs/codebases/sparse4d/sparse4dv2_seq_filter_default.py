# SYNTHETIC: petrsim's own config in the shape of Sparse4Dv2's (linxuewu/Sparse4D@db711ad5
# projects/configs/sparse4dv2_r50_HInf_256x704.py): sequence chunks under Sparse4D's key names
# (with_seq_flag, sequences_split_num), CircleObjectRangeFilter, an IterBasedRunner. Unlike the
# published file it leaves filter_empty_gt at the class default (True): the redraws then stay
# inside a half-scene chunk, as in StreamPETR, and a chunk without GT livelocks the job. Its circle
# is 50 m where the published file has 55 m, so that the test infos' boxes at 51.2 m fall outside it.
num_gpus = 2
batch_size = 1
num_iters_per_epoch = int(28130 // (num_gpus * batch_size))
num_epochs = 100
checkpoint_epoch_interval = 20
checkpoint_config = dict(interval=num_iters_per_epoch * checkpoint_epoch_interval)
log_config = dict(interval=51, hooks=[dict(type="TextLoggerHook", by_epoch=False)])
dist_params = dict(backend="nccl")
plugin = True
plugin_dir = "projects/mmdet3d_plugin/"
input_shape = (704, 256)

class_names = [
    "car", "truck", "construction_vehicle", "bus", "trailer",
    "barrier", "motorcycle", "bicycle", "pedestrian", "traffic_cone",
]
num_classes = len(class_names)
embed_dims = 256
model = dict(
    type="Sparse4D",
    use_grid_mask=True,
    head=dict(type="Sparse4DHead", num_decoder=6, cls_threshold_to_reg=0.05,
              decoder=dict(type="SparseBox3DDecoder"), num_classes=num_classes,
              reg_weights=[2.0] * 3 + [1.0] * 7),
)

dataset_type = "NuScenes3DDetTrackDataset"
data_root = "data/nuscenes/"
anno_root = "data/nuscenes_cam/"
file_client_args = dict(backend="disk")

train_pipeline = [
    dict(type="LoadMultiViewImageFromFiles", to_float32=True),
    dict(type="LoadPointsFromFile", coord_type="LIDAR", load_dim=5, use_dim=5, file_client_args=file_client_args),
    dict(type="ResizeCropFlipImage"),
    dict(type="MultiScaleDepthMapGenerator", downsample=[4, 8, 16]),
    dict(type="BBoxRotation"),
    dict(type="PhotoMetricDistortionMultiViewImage"),
    dict(type="NormalizeMultiviewImage", mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375], to_rgb=True),
    dict(type="CircleObjectRangeFilter", class_dist_thred=[50] * len(class_names)),
    dict(type="InstanceNameFilter", classes=class_names),
    dict(type="NuScenesSparse4DAdaptor"),
    dict(type="Collect", keys=["img", "timestamp", "projection_mat", "image_wh", "gt_depth", "focal",
                                "gt_bboxes_3d", "gt_labels_3d"], meta_keys=["T_global", "T_global_inv", "timestamp"]),
]
data_basic_config = dict(type=dataset_type, data_root=data_root, classes=class_names, version="v1.0-trainval")
data_aug_conf = {
    "resize_lim": (0.40, 0.47),
    "final_dim": input_shape[::-1],
    "bot_pct_lim": (0.0, 0.0),
    "rot_lim": (-5.4, 5.4),
    "H": 900,
    "W": 1600,
    "rand_flip": True,
}
data = dict(
    samples_per_gpu=batch_size,
    workers_per_gpu=batch_size,
    train=dict(
        **data_basic_config,
        ann_file=anno_root + "nuscenes_infos_train.pkl",
        pipeline=train_pipeline,
        test_mode=False,
        data_aug_conf=data_aug_conf,
        with_seq_flag=True,
        sequences_split_num=2,
        keep_consistent_seq_aug=True,
    ),
)
optimizer = dict(type="AdamW", lr=6e-4, weight_decay=0.001)
lr_config = dict(policy="CosineAnnealing", warmup="linear", warmup_iters=500, warmup_ratio=1.0 / 3, min_lr_ratio=1e-3)
runner = dict(type="IterBasedRunner", max_iters=num_iters_per_epoch * num_epochs)
evaluation = dict(interval=num_iters_per_epoch * checkpoint_epoch_interval)
