# workflow is a list in the base: a dict over it needs _delete_=True.
_base_ = '../_base_/default_runtime.py'

workflow = dict(
    train=1)
