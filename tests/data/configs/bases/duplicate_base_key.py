# Two bases both set point_cloud_range: mmcv raises
# KeyError('Duplicate key is not allowed among bases. ...').
_base_ = ['./dup_a.py', './dup_b.py']
num_gpus = 8
