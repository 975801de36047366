_base_ = '../_base_/datasets/nus-3d.py'
# point_cloud_range is the base's, not visible here
model = dict(
    pts_bbox_head=dict(
        pc_range=point_cloud_range))
