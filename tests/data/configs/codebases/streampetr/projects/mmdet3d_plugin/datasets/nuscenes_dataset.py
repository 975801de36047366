# SYNTHETIC: petrsim's own stand-in for StreamPETR's dataset class (exiawsh/StreamPETR@95f64702
# projects/mmdet3d_plugin/datasets/nuscenes_dataset.py), written for the tests of
# importers/dataset_source.h: the same signature, sequence flags and retry loop, none of the loading.
import math

import numpy as np
from mmdet.datasets import DATASETS
from mmdet3d.datasets import NuScenesDataset


@DATASETS.register_module()
class CustomNuScenesDataset(NuScenesDataset):
    """Frames grouped into scene chunks when seq_mode is set."""

    def __init__(self, collect_keys, seq_mode=False, seq_split_num=1, num_frame_losses=1, queue_length=8,
                 random_length=0, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.collect_keys = collect_keys
        self.queue_length = queue_length
        self.num_frame_losses = num_frame_losses
        self.random_length = random_length
        self.seq_mode = seq_mode
        if seq_mode:
            self.queue_length = 1
            self.num_frame_losses = 1
            self.seq_split_num = seq_split_num
            self._set_sequence_group_flag()

    def _set_sequence_group_flag(self):
        flags = []
        sequence = 0
        for i, info in enumerate(self.data_infos):
            if i != 0 and len(info['sweeps']) == 0:
                sequence += 1
            flags.append(sequence)
        self.flag = np.array(flags, dtype=np.int64)
        if self.seq_split_num == 'all':
            self.flag = np.arange(len(self.data_infos), dtype=np.int64)
        elif self.seq_split_num != 1:
            counts = np.bincount(self.flag)
            chunked = []
            for sequence, count in enumerate(counts):
                step = math.ceil(count / self.seq_split_num)
                for start in range(0, count, step):
                    chunked.extend([len(set(chunked))] * min(step, count - start))
            self.flag = np.array(chunked, dtype=np.int64)

    def prepare_train_data(self, index):
        indices = sorted(range(index - self.queue_length - self.random_length + 1, index))[self.random_length:]
        queue = [self.pipeline(self.get_data_info(max(0, i))) for i in indices + [index]]
        for k in range(self.num_frame_losses):
            if self.filter_empty_gt and (queue[-k - 1] is None or not (queue[-k - 1]['gt_labels_3d'] != -1).any()):
                return None
        return queue

    def __getitem__(self, idx):
        if self.test_mode:
            return self.prepare_test_data(idx)
        while True:
            data = self.prepare_train_data(idx)
            if data is None:
                idx = self._rand_another(idx)
                continue
            return data
