_base_ = [
    '../_base_/default_runtime.py',
    3]
