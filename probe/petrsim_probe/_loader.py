"""DataLoader hooks: the batch sampler's draws, batches ready, data waits and iterations.

Main process: `_BaseDataLoaderIter._next_index` is where the DataLoader takes a batch of indices
from its (batch) sampler, for the batch it dispatches next: one sampler_draw per slot.
`_BaseDataLoaderIter.__next__` is the main process waiting for its next batch: a data_wait slice,
and the training iteration it starts (collectives until the next batch belong to it).
Workers: `torch.utils.data._utils.worker._worker_loop`, looked up when the iterator starts its
workers (so forked workers run the wrapper), sees each batch number arrive on the index queue
(the getitems that follow are its slots) and each batch leave on the data queue (batch_ready).
Only the DataLoader iterated first (the training loader of a training script) is recorded.
"""

import os
import signal

import torch.utils.data._utils.worker as worker_module
from torch.utils.data import dataloader as dataloader_module

from . import wire
from ._recorder import now_ns


class _IndexQueue:
    """The worker's index queue, seeing which batch it loads next."""

    def __init__(self, inner, hooks, base):
        self._inner, self._hooks, self._base = inner, hooks, base

    def get(self, *args, **kwargs):
        r = self._inner.get(*args, **kwargs)
        if isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], int):
            self._hooks.new_batch(self._base + r[0])
        return r

    def __getattr__(self, name):
        return getattr(self._inner, name)


class _DataQueue:
    """The worker's data queue, seeing each batch leave (batch_ready)."""

    def __init__(self, inner, probe, base):
        self._inner, self._probe, self._base = inner, probe, base

    def put(self, item, *args, **kwargs):
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], int):
            rec = self._probe.recorder
            t = now_ns()
            data = item[1]
            text = ""
            if type(data).__name__ == "ExceptionWrapper":
                text = "the worker sends the exception: {}".format(
                    getattr(getattr(data, "exc_type", None), "__name__", "exception"))
            rec.event(wire.BATCH_READY, t, t, worker=rec.role, iteration=self._base + item[0],
                      text=text)
            rec.flush()
        return self._inner.put(item, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class LoaderHooks:
    def __init__(self, probe):
        self.probe = probe
        self.dataset_id = None  # the recorded loader's dataset
        self.iter_base = 0  # batch number of the current iterator's batch 0
        self.consumed = 0  # batches the main process took from the recorded loader
        self.originals = []

    def install(self):
        hooks = self
        probe = self.probe
        DataLoader = dataloader_module.DataLoader
        BaseIter = dataloader_module._BaseDataLoaderIter
        SingleIter = dataloader_module._SingleProcessDataLoaderIter

        original_get_iterator = DataLoader._get_iterator
        original_next_index = BaseIter._next_index
        original_next = BaseIter.__next__
        original_worker_loop = worker_module._worker_loop

        def _get_iterator(loader):
            if hooks.dataset_id is None:
                hooks.dataset_id = id(loader.dataset)
                probe.datasets.register(loader.dataset)
                probe.ensure_open()  # before the workers fork: they inherit the file
            if id(loader.dataset) == hooks.dataset_id:
                hooks.iter_base = hooks.consumed
                probe.recorder.flush()  # nothing buffered is copied into the workers
            return original_get_iterator(loader)

        def _next_index(it):
            index = original_next_index(it)
            if id(it._dataset) != hooks.dataset_id or probe.recorder.role != -1:
                return index
            n = it.__dict__.get("_petrsim_dispatched", 0)
            it._petrsim_dispatched = n + 1
            batch = hooks.iter_base + n
            t = now_ns()
            event = probe.recorder.event
            group_of = probe.datasets.group_of
            slots = index if isinstance(index, (list, tuple)) else [index]
            for slot, i in enumerate(slots):
                i = int(i)
                event(wire.SAMPLER_DRAW, t, t, iteration=batch, slot=slot, index=i,
                      group=group_of(i))
            if isinstance(it, SingleIter):
                probe.datasets.new_batch(batch)  # the main process loads it right away
            return index

        def __next__(it):
            if id(it._dataset) != hooks.dataset_id or probe.recorder.role != -1:
                return original_next(it)
            batch = hooks.consumed
            t0 = now_ns()
            probe.before_batch(batch, t0)
            data = original_next(it)  # StopIteration, a worker's exception: nothing consumed
            t1 = now_ns()
            hooks.consumed += 1
            rec = probe.recorder
            rec.event(wire.DATA_WAIT, t0, t1, iteration=batch)
            if isinstance(it, SingleIter):
                rec.event(wire.BATCH_READY, t1, t1, iteration=batch)
            probe.start_iteration(batch, t0)
            return data

        def _worker_loop(*args, **kwargs):
            # (dataset_kind, dataset, index_queue, data_queue, done_event, auto_collation,
            #  collate_fn, drop_last, base_seed, init_fn, worker_id, ...) in torch 1.8 - 2.x
            args = list(args)
            dataset = args[1] if len(args) > 1 else kwargs.get("dataset")
            if id(dataset) == hooks.dataset_id and os.getpid() != probe.recorder.owner_pid:
                worker_id = args[10] if len(args) > 10 else kwargs.get("worker_id")
                probe.in_worker(int(worker_id))
                base = hooks.iter_base
                if len(args) > 3:
                    args[2] = _IndexQueue(args[2], probe.datasets, base)
                    args[3] = _DataQueue(args[3], probe, base)
                else:
                    kwargs["index_queue"] = _IndexQueue(kwargs["index_queue"], probe.datasets, base)
                    kwargs["data_queue"] = _DataQueue(kwargs["data_queue"], probe, base)
                try:
                    return original_worker_loop(*args, **kwargs)
                finally:
                    probe.worker_exit()
            return original_worker_loop(*args, **kwargs)

        DataLoader._get_iterator = _get_iterator
        BaseIter._next_index = _next_index
        BaseIter.__next__ = __next__
        worker_module._worker_loop = _worker_loop
        self.originals = [(DataLoader, "_get_iterator", original_get_iterator),
                          (BaseIter, "_next_index", original_next_index),
                          (BaseIter, "__next__", original_next),
                          (worker_module, "_worker_loop", original_worker_loop)]

    def uninstall(self):
        for owner, name, original in self.originals:
            setattr(owner, name, original)
        self.originals = []


def reset_worker_signals():
    """A forked worker must not write the main process's wakeup fd (its SIGTERM is its own)."""
    try:
        signal.set_wakeup_fd(-1)
    except (ValueError, OSError):
        pass
