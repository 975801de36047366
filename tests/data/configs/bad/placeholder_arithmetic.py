_base_ = '../_base_/datasets/nus-3d.py'
data_root = {{_base_.data_root}}
ann_file = data_root + 'nuscenes_infos_train.pkl'
