_base_ = '../_base_/datasets/nus-3d.py'
classes = _base_.class_names
