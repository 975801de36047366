# SYNTHETIC: petrsim's own stand-in for BEVFormer's dataset class (fundamentalvision/BEVFormer@66b65f3a
# projects/mmdet3d_plugin/datasets/nuscenes_dataset.py): a queue of earlier frames, the base's group
# flag of zeros and its _rand_another.
import random

from mmdet.datasets import DATASETS
from mmdet3d.datasets import NuScenesDataset


@DATASETS.register_module()
class CustomNuScenesDataset(NuScenesDataset):

    def __init__(self, queue_length=4, bev_size=(200, 200), overlap_test=False, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.queue_length = queue_length
        self.overlap_test = overlap_test
        self.bev_size = bev_size

    def prepare_train_data(self, index):
        indices = list(range(index - self.queue_length, index))
        random.shuffle(indices)
        indices = sorted(indices[1:]) + [index]
        for i in indices:
            if self.get_data_info(max(0, i)) is None:
                return None
        return indices

    def __getitem__(self, idx):
        if self.test_mode:
            return self.prepare_test_data(idx)
        while True:
            data = self.prepare_train_data(idx)
            if data is None:
                idx = self._rand_another(idx)
                continue
            return data
