# SYNTHETIC: petrsim's own stand-in for PETR's dataset class (megvii-research/PETR@f7525f93
# projects/mmdet3d_plugin/datasets/nuscenes_dataset.py): only get_data_info changes; the retry loop,
# the group flag of zeros and _rand_another are mmdet3d's.
from mmdet.datasets import DATASETS
from mmdet3d.datasets import NuScenesDataset


@DATASETS.register_module()
class CustomNuScenesDataset(NuScenesDataset):

    def get_data_info(self, index):
        info = self.data_infos[index]
        return dict(sample_idx=info['token'], timestamp=info['timestamp'] / 1e6)
