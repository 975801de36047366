# a tuple is not a list for mmcv
_base_ = ('../_base_/default_runtime.py',)
