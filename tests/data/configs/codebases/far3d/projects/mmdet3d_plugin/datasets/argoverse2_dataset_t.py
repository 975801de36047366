# SYNTHETIC: petrsim's own stand-in for Far3D's dataset class (megvii-research/Far3D@5efb9d73
# projects/mmdet3d_plugin/datasets/argoverse2_dataset_t.py): sequence chunks by scene, and a
# _rand_another that draws from every index (no flag is ever -1), so no chunk can trap the loader.
import numpy as np
from av2.evaluation.detection.constants import CompetitionCategories
from mmdet.datasets import DATASETS
from mmdet3d.datasets import Custom3DDataset


@DATASETS.register_module()
class Argoverse2DatasetT(Custom3DDataset):
    CLASSES = tuple(x.value for x in CompetitionCategories)

    def __init__(self, collect_keys, seq_mode=False, seq_split_num=1, num_frame_losses=1, queue_length=8,
                 random_length=0, interval_test=False, filter_empty_gt=True, use_valid_flag=False, *args, **kwargs):
        super().__init__(*args, filter_empty_gt=filter_empty_gt, **kwargs)
        self.use_valid_flag = use_valid_flag
        self.seq_mode = seq_mode
        if seq_mode:
            self.seq_split_num = seq_split_num
            self._set_sequence_group_flag()

    def _set_sequence_group_flag(self):
        flags = []
        sequence = 0
        for i, info in enumerate(self.data_infos):
            if i != 0 and info['scene_id'] != self.data_infos[i - 1]['scene_id']:
                sequence += 1
            flags.append(sequence)
        self.flag = np.array(flags, dtype=np.int64)

    def __getitem__(self, idx):
        if self.test_mode:
            return self.prepare_test_data(idx)
        while True:
            data = self.prepare_train_data(idx)
            if data is None:
                idx = self._rand_another(idx)
                continue
            return data

    def _rand_another(self, idx):
        pool = np.where(self.flag != -1)[0]
        return np.random.choice(pool)
