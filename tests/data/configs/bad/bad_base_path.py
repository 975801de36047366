_base_ = [
    '../_base_/default_runtime.py',
    '../_base_/datasets/nus-3d-missing.py'
]
