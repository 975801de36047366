"""DataLoader hooks: the batch sampler's draws, batches ready, data waits and iterations.

Main process: `_BaseDataLoaderIter._next_index` is where the DataLoader takes a batch of indices
from its (batch) sampler, for the batch it dispatches next: one sampler_draw per slot.
`_BaseDataLoaderIter.__next__` is the main process waiting for its next batch: a data_wait slice,
and, for the first DataLoader, the training iteration it starts (collectives until the next batch
belong to it). Every DataLoader is recorded, numbered per rank in the order first iterated (the
events' `loader`; one numbering per dataset, so a new DataLoader over the same dataset each epoch
continues its batches); batch numbers are the loader's own, and loader 0's are the iterations.
Workers: torch's `_worker_loop` is replaced (in `torch.utils.data._utils.worker`, where the
iterator looks it up when it starts its workers) by `worker_loop`, a module-level function, so a
spawned or forkserver worker, which gets it pickled by name, runs it too (petrsim_probe must be
importable there: it is, through PYTHONPATH or the sys.path spawn copies). What the worker needs
(the trace file, rank, bounds, loader number, first batch number) travels as its worker_init_fn,
a WorkerSetup wrapping the user's, pickled with the other arguments; worker_loop unwraps it, sets
up the worker's probe, and wraps the index queue (each batch number arriving: the getitems that
follow are its slots) and the data queue (each batch leaving: batch_ready).
"""

import os
import signal
import time
import weakref

import torch.utils.data._utils.worker as worker_module
from torch.utils.data import dataloader as dataloader_module

from . import wire
from ._recorder import now_ns

_ORIGINAL_WORKER_LOOP = worker_module._worker_loop


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

    def __init__(self, inner, probe, base, loader):
        self._inner, self._probe, self._base, self._loader = inner, probe, base, loader

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
                      text=text, loader=self._loader)
            rec.flush()
        return self._inner.put(item, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


class LoaderState:
    """One recorded DataLoader (per dataset) of the main process."""
    __slots__ = ("number", "dataset", "consumed", "iter_base")

    def __init__(self, number, dataset):
        self.number = number
        self.dataset = dataset  # held: its id keys the state, and must not be reused
        self.consumed = 0  # batches the main process took from it
        self.iter_base = 0  # batch number of the current iterator's batch 0


class WorkerSetup:
    """A recorded DataLoader's worker_init_fn while its iterator starts the workers: what a worker
    needs to record (pickled to a spawned or forkserver worker with torch's other arguments), and
    the user's worker_init_fn, which worker_loop puts back before torch's loop calls it."""

    def __init__(self, probe, state, init_fn):
        rec = probe.recorder
        self.trace_dir = probe.trace_dir
        self.trace_path = rec.path
        self.rank, self.world_size = rec.rank, rec.world_size
        self.build_id = rec.build_id
        self.livelock_attempts = probe.livelock_attempts
        self.livelock_seconds = probe.livelock_seconds
        self.stop_stalls = probe.stop_stalls
        self.loader = state.number
        self.base = state.iter_base
        self.main_pid = os.getpid()
        self.init_fn = init_fn

    def __call__(self, worker_id):  # (only if torch's loop runs without worker_loop)
        if self.init_fn is not None:
            self.init_fn(worker_id)


def worker_loop(*args, **kwargs):
    """torch's _worker_loop, recorded when its init_fn is a WorkerSetup.
    (dataset_kind, dataset, index_queue, data_queue, done_event, auto_collation, collate_fn,
    drop_last, base_seed, init_fn, worker_id, ...) in torch 1.8 - 2.x."""
    args = list(args)
    positional = len(args) > 9
    setup = args[9] if positional else kwargs.get("init_fn")
    if not isinstance(setup, WorkerSetup):
        return _ORIGINAL_WORKER_LOOP(*args, **kwargs)
    from . import worker_probe

    probe = worker_probe(setup)
    user_init = setup.init_fn

    def init_fn(worker_id):
        # torch's loop calls it after its own signal handlers (a SIGTERM handler in C that ends
        # the worker at once): the probe's replace that one, so the getitem in flight is written.
        probe.worker_signals(setup)
        if user_init is not None:
            user_init(worker_id)

    init = user_init if probe is None else init_fn
    if positional:
        args[9] = init
    else:
        kwargs["init_fn"] = init
    if probe is None:
        return _ORIGINAL_WORKER_LOOP(*args, **kwargs)
    dataset = args[1] if len(args) > 1 else kwargs.get("dataset")
    worker_id = args[10] if len(args) > 10 else kwargs.get("worker_id")
    probe.in_worker(int(worker_id), setup, dataset)
    base = setup.base
    if len(args) > 3:
        args[2] = _IndexQueue(args[2], probe.datasets, base)
        args[3] = _DataQueue(args[3], probe, base, setup.loader)
    else:
        kwargs["index_queue"] = _IndexQueue(kwargs["index_queue"], probe.datasets, base)
        kwargs["data_queue"] = _DataQueue(kwargs["data_queue"], probe, base, setup.loader)
    try:
        return _ORIGINAL_WORKER_LOOP(*args, **kwargs)
    finally:
        probe.worker_exit()


class LoaderHooks:
    def __init__(self, probe):
        self.probe = probe
        self.states = {}  # id(a DataLoader's dataset) -> LoaderState
        self.iterators = weakref.WeakSet()  # the recorded loaders' iterators (their workers)
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

        def _get_iterator(loader):
            if probe.recorder.role != -1 or os.getpid() != probe.recorder.owner_pid:
                return original_get_iterator(loader)  # a DataLoader inside a worker
            state = hooks.states.get(id(loader.dataset))
            if state is None:
                state = LoaderState(len(hooks.states), loader.dataset)
                hooks.states[id(loader.dataset)] = state
                probe.datasets.register(loader.dataset, state.number)
                probe.ensure_open()  # before the workers start: they append to the file
            state.iter_base = state.consumed
            probe.recorder.flush()  # nothing buffered is copied into forked workers
            init_fn = loader.worker_init_fn
            setup = loader.num_workers > 0
            if setup:
                loader.worker_init_fn = WorkerSetup(probe, state, init_fn)
            try:
                it = original_get_iterator(loader)
            finally:
                if setup:
                    loader.worker_init_fn = init_fn
            hooks.iterators.add(it)
            return it

        def _next_index(it):
            index = original_next_index(it)
            # (by its dataset: the iterator draws its prefetched batches while it is made)
            state = hooks.states.get(id(it._dataset))
            if state is None or probe.recorder.role != -1:
                return index
            n = it.__dict__.get("_petrsim_dispatched", 0)
            it._petrsim_dispatched = n + 1
            batch = state.iter_base + n
            t = now_ns()
            event = probe.recorder.event
            group_of = probe.datasets.group_of
            dataset_id = id(state.dataset)
            slots = index if isinstance(index, (list, tuple)) else [index]
            for slot, i in enumerate(slots):
                try:
                    i = int(i)
                except (TypeError, ValueError):  # an IterableDataset's (None)
                    continue
                event(wire.SAMPLER_DRAW, t, t, iteration=batch, slot=slot, index=i,
                      group=group_of(i, dataset_id), loader=state.number)
            if isinstance(it, SingleIter):
                probe.datasets.new_batch(batch, state.number)  # the main process loads it now
            return index

        def __next__(it):
            state = hooks.states.get(id(it._dataset))
            if state is None or probe.recorder.role != -1:
                return original_next(it)
            batch = state.consumed
            training = state.number == 0  # the first DataLoader's batches are the iterations
            t0 = now_ns()
            if training:
                probe.before_batch(batch, t0)
            data = original_next(it)  # StopIteration, a worker's exception: nothing consumed
            t1 = now_ns()
            state.consumed += 1
            rec = probe.recorder
            rec.event(wire.DATA_WAIT, t0, t1, iteration=batch, loader=state.number)
            if isinstance(it, SingleIter):
                rec.event(wire.BATCH_READY, t1, t1, iteration=batch, loader=state.number)
            if training:
                probe.start_iteration(batch, t0)
            return data

        DataLoader._get_iterator = _get_iterator
        BaseIter._next_index = _next_index
        BaseIter.__next__ = __next__
        worker_module._worker_loop = worker_loop
        self.originals = [(DataLoader, "_get_iterator", original_get_iterator),
                          (BaseIter, "_next_index", original_next_index),
                          (BaseIter, "__next__", original_next),
                          (worker_module, "_worker_loop", _ORIGINAL_WORKER_LOOP)]

    def uninstall(self):
        for owner, name, original in self.originals:
            setattr(owner, name, original)
        self.originals = []

    def stop_workers(self, timeout_s=1.0):
        """Terminates the recorded loaders' live workers (SIGTERM: each records the getitem it is
        in) and waits for them, at most timeout_s in all (main process, when it is killed or
        fails)."""
        stopped = []
        for it in list(self.iterators):
            for w in list(getattr(it, "_workers", None) or ()):
                try:
                    if w.is_alive():
                        w.terminate()
                        stopped.append(w)
                except Exception:  # noqa: BLE001 - a worker already gone or being reaped
                    pass
        deadline = time.monotonic() + timeout_s
        for w in stopped:
            try:
                w.join(max(0.0, deadline - time.monotonic()))
            except Exception:  # noqa: BLE001
                pass


def reset_worker_signals():
    """A forked worker must not write the main process's wakeup fd (its SIGTERM is its own)."""
    try:
        signal.set_wakeup_fd(-1)
    except (ValueError, OSError):
        pass
