# Another base for duplicate_base_key.py: point_cloud_range again.
class_names = ['car', 'pedestrian']

point_cloud_range = [-54.0, -54.0, -5.0, 54.0, 54.0, 3.0]
