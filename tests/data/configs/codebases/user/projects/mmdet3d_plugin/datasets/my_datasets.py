# SYNTHETIC (petrsim's own test fixture, not upstream code): A user's own dataset classes over StreamPETR's (petrsim's test fixture, importers/dataset_source.h):
# the fix for the seed job's hang written as the user writes it, a _rand_another that draws from the
# whole dataset; and an mmengine-style bounded retry loop.
import numpy as np
from mmdet.datasets import DATASETS
from projects.mmdet3d_plugin.datasets import CustomNuScenesDataset


@DATASETS.register_module()
class GlobalResampleDataset(CustomNuScenesDataset):
    """StreamPETR's dataset whose redraw may leave the frame's chunk."""

    def _rand_another(self, idx):
        return np.random.randint(0, len(self))


@DATASETS.register_module()
class BoundedRetryDataset(CustomNuScenesDataset):
    """Gives up after max_refetch redraws, as mmengine's BaseDataset does."""

    def __init__(self, *args, max_refetch=1000, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_refetch = max_refetch

    def __getitem__(self, idx):
        if self.test_mode:
            return self.prepare_test_data(idx)
        for _ in range(self.max_refetch + 1):
            data = self.prepare_train_data(idx)
            if data is None:
                idx = self._rand_another(idx)
                continue
            return data
        raise RuntimeError(f'no frame with GT after {self.max_refetch} redraws')


@DATASETS.register_module()
class NoRetryDataset(CustomNuScenesDataset):
    """Returns prepare_train_data's result as it is: a None reaches the collate function."""

    def __getitem__(self, idx):
        if self.test_mode:
            return self.prepare_test_data(idx)
        return self.prepare_train_data(idx)
