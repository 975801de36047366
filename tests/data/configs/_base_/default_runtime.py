# A runtime base in the shape of mmdet3d 1.0's configs/_base_/default_runtime.py (written for
# petrsim's tests).
checkpoint_config = dict(interval=1)
# yapf:disable push
log_config = dict(
    interval=50,
    hooks=[
        dict(type='TextLoggerHook'),
        dict(type='TensorboardLoggerHook')
    ])
# yapf:enable
dist_params = dict(backend='nccl')
log_level = 'INFO'
work_dir = None
load_from = None
resume_from = None
workflow = [('train', 1)]

opencv_num_threads = 0
mp_start_method = 'fork'
