# SYNTHETIC: petrsim's own config in the shape of StreamPETR's test_speed config (exiawsh/StreamPETR@95f64702
# projects/configs/test_speed/stream_petr_r50_704_bs2_seq_428q_nui_speed_test.py): sequence mode with
# filter_empty_gt at CustomNuScenesDataset's default (True), the one published StreamPETR config where
# the in-chunk resample is live. Written over petrsim's own StreamPETR test config.
_base_ = ['../../streampetr/stream_petr_r50_704_bs2_seq_24e.py']
data = dict(train=dict(_delete_=True,
                       type='CustomNuScenesDataset',
                       data_root='./data/nuscenes/',
                       ann_file='./data/nuscenes/' + 'nuscenes2d_temporal_infos_train.pkl',
                       num_frame_losses=1,
                       seq_split_num=2,
                       seq_mode=True,
                       pipeline={{_base_.train_pipeline}},
                       classes={{_base_.class_names}},
                       collect_keys=['lidar2img', 'intrinsics', 'extrinsics', 'timestamp', 'img_timestamp',
                                     'ego_pose', 'ego_pose_inv', 'img', 'prev_exists', 'img_metas'],
                       queue_length=1,
                       test_mode=False,
                       use_valid_flag=True,
                       box_type_3d='LiDAR'))
