_base_ = '../_base_/default_runtime.py'
hooks = {{_base_.log_config.hooks_missing}}
