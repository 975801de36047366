_base_ = '../_base_/datasets/nus-3d.py'
ann_file = '{{_base_.data_root}}nuscenes_infos_train.pkl'
