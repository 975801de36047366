# a config that imports a class
from mmcv import Config
