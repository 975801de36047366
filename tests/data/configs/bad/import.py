# mmdet3d configs never import; this one does.
num_gpus = 8
import os
