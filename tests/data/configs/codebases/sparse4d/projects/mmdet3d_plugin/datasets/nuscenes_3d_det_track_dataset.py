# SYNTHETIC: petrsim's own stand-in for Sparse4D's dataset class (linxuewu/Sparse4D@db711ad5
# projects/mmdet3d_plugin/datasets/nuscenes_3d_det_track_dataset.py): StreamPETR's chunking under other
# key names, and a retry loop one call below __getitem__.
import numpy as np
from mmdet.datasets import DATASETS
from mmdet3d.datasets import Custom3DDataset


@DATASETS.register_module()
class NuScenes3DDetTrackDataset(Custom3DDataset):
    CLASSES = (
        "car",
        "truck",
        "trailer",
        "bus",
        "construction_vehicle",
        "bicycle",
        "motorcycle",
        "pedestrian",
        "traffic_cone",
        "barrier",
    )

    def __init__(self, ann_file, pipeline=None, data_root=None, classes=None, load_interval=1, with_velocity=True,
                 modality=None, test_mode=False, use_valid_flag=False, filter_empty_gt=True, sequences_split_num=1,
                 with_seq_flag=False, keep_consistent_seq_aug=True, **kwargs):
        super().__init__(ann_file=ann_file, classes=classes, test_mode=test_mode, filter_empty_gt=filter_empty_gt)
        self.use_valid_flag = use_valid_flag
        self.sequences_split_num = sequences_split_num
        if with_seq_flag:
            self._set_sequence_group_flag()

    def _set_sequence_group_flag(self):
        flags = [0]
        for info in self.data_infos[1:]:
            flags.append(flags[-1] + (1 if len(info["sweeps"]) == 0 else 0))
        self.flag = np.array(flags, dtype=np.int64)

    def _getitem(self, idx, aug_configs=None):
        if self.test_mode:
            return self.prepare_test_data(idx)
        while True:
            data = self.prepare_train_data(idx, aug_configs)
            if data is None:
                idx = self._rand_another(idx)
                continue
            return data

    def __getitem__(self, idx):
        if isinstance(idx, dict):
            aug_configs = idx["aug"]
            idx = idx["idx"]
        else:
            aug_configs = None
        return self._getitem(idx, aug_configs)
