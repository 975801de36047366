"""Recording every __getitem__ attempt, and the livelock watchdog, by wrapping dataset classes.

Each DataLoader's dataset is walked when the DataLoader is first iterated (in the main process,
before its workers start, so forked ones inherit the wrappers; a spawned or forkserver worker
walks its own copy when it starts): through ConcatDataset-like containers (`datasets`
and `cumulative_sizes`, as torch's and mmdet's ConcatDataset have) down to the leaf datasets,
each with its offset in the concatenation. The leaf's own class (the user's subclass, if any) gets
wrapped `prepare_train_data` and `_rand_another` (mmdet3d's Custom3DDataset protocol: the first
returns None for a frame without GT, the second draws the index to try next), resolved through
its MRO, so a subclass's `super()` calls reach the original unwrapped; the top-level dataset's
class gets a wrapped `__getitem__` that brackets one getitem of one batch slot.

A getitem's attempts are kept in memory; when it resampled, each attempt becomes a
getitem_attempt event (index, GT count, accepted, or the index it resamples to), then a `load`
slice (sampler's index, final index, attempts). Instances the DataLoader does not use pass
through untouched.
"""

import os
import threading

import numpy as np

from . import wire
from ._recorder import now_ns

# At most this many getitem_attempt events for one getitem (a spinning one can make millions).
ATTEMPT_EVENTS_MAX = 256


class LivelockError(RuntimeError):
    """Raised in a DataLoader worker by the probe's livelock watchdog."""


class StallError(RuntimeError):
    """Raised in a DataLoader worker whose __getitem__ has not returned for the stall bound, when
    the probe stops stalls (install(stop_stalls=True))."""


class Top:
    """A DataLoader's dataset: its loader number, `flag` and leaf datasets."""
    __slots__ = ("loader", "flag", "leaves")

    def __init__(self, loader, flag):
        self.loader, self.flag, self.leaves = loader, flag, []


class Leaf:
    __slots__ = ("offset", "subdataset", "name", "size", "flag")

    def __init__(self, offset, subdataset, name, size, flag):
        self.offset, self.subdataset, self.name, self.size, self.flag = (
            offset, subdataset, name, size, flag)


class GetItem:
    """One getitem of one batch slot, in progress."""
    __slots__ = ("batch", "slot", "index", "start_ns", "attempts", "count", "leaf", "local",
                 "rejected_since_ns", "pool_leaf", "pool_flag", "one_pool", "seen", "last_index",
                 "loader", "thread", "open", "stalled", "stop_sent_ns")

    def __init__(self, batch, slot, index, start_ns, loader=0):
        self.batch, self.slot, self.index, self.start_ns = batch, slot, index, start_ns
        self.loader = loader
        self.thread = threading.get_ident()  # whose stack the stall watcher samples
        self.open = [True]  # see take()
        self.stalled = False  # the stall watcher has recorded it
        self.stop_sent_ns = None  # stop_stalls: when the watcher last told the worker to stop
        self.attempts = []  # [global index, gt_count, accepted, resampled-to]
        self.count = 0
        self.leaf = None
        self.one_pool = True
        self.pool_leaf = None
        self.pool_flag = None
        self.seen = set()
        self.last_index = index

    def take(self):
        """True for the one caller that records this getitem's end (the getitem returning, the
        worker's SIGTERM handler, the stall watcher, the livelock watchdog): list.pop is atomic
        under the GIL, and a signal handler may interrupt the main thread anywhere."""
        try:
            self.open.pop()
            return True
        except IndexError:
            return False

    def loading_index(self):
        """The dataset index it is loading now: the sampler's, or where a resample loop went."""
        if self.attempts:
            last = self.attempts[-1]
            return last[3] if last[3] != -1 else last[0]
        return self.index


def _gt_count(data):
    """The GT boxes of a prepared sample, as mmdet3d's filter_empty_gt check counts them
    (labels != -1 of gt_labels_3d, through a DataContainer); 0 for None."""
    if data is None:
        return 0
    labels = None
    if isinstance(data, dict):
        labels = data.get("gt_labels_3d", data.get("gt_labels"))
    if labels is None:
        return 0
    for attr in ("_data", "data"):  # mmcv DataContainer
        if hasattr(labels, attr) and not isinstance(labels, np.ndarray) and not hasattr(labels, "numel"):
            labels = getattr(labels, attr)
            break
    try:
        if hasattr(labels, "numel"):  # a torch tensor
            if labels.device.type == "cpu" and not labels.requires_grad and \
                    not labels.is_sparse:  # through numpy (shares the memory): cheaper
                return int(np.count_nonzero(labels.numpy() != -1))
            return int((labels != -1).sum())
        return int(np.count_nonzero(np.asarray(labels) != -1))
    except Exception:  # an unusual label container: count is unknown
        return 0


class DatasetHooks:
    def __init__(self, probe):
        self.probe = probe
        self.leaves = {}  # id(leaf dataset) -> Leaf
        self.tops = {}  # id(a DataLoader's dataset) -> Top
        self.current = None  # the GetItem in progress in this process
        self.batch = 0
        self.slot = 0
        self.loader = 0  # the DataLoader whose batch this process loads (a worker serves one)
        self.wrapped = set()

    # -- registration (main process, DataLoader construction) ----------------------------------

    def register(self, dataset, loader=0):
        """A DataLoader's dataset (in the main process before its workers start; in a spawned or
        forkserver worker, the worker's own copy, whose classes this process has not wrapped)."""
        if id(dataset) in self.tops:
            return
        flag = getattr(dataset, "flag", None)
        top = self.tops[id(dataset)] = Top(loader, np.asarray(flag) if flag is not None else None)
        self._walk(dataset, 0, [0], top)
        self._wrap(type(dataset), "__getitem__", self._make_getitem)

    def _walk(self, dataset, offset, counter, top):
        subs = getattr(dataset, "datasets", None)
        cumulative = getattr(dataset, "cumulative_sizes", None)
        if subs is not None and cumulative is not None and len(subs) == len(cumulative):
            for i, sub in enumerate(subs):
                self._walk(sub, offset + (cumulative[i - 1] if i else 0), counter, top)
            return
        flag = getattr(dataset, "flag", None)
        name = getattr(dataset, "petrsim_name", None)
        ann_file = getattr(dataset, "ann_file", None)
        if not name and isinstance(ann_file, str) and ann_file:  # mmdet3d: its info file
            name = os.path.splitext(os.path.basename(ann_file))[0]
        name = name or type(dataset).__name__
        leaf = self.leaves.setdefault(id(dataset), Leaf(
            offset, counter[0], name, len(dataset), np.asarray(flag) if flag is not None else None))
        top.leaves.append(leaf)
        counter[0] += 1
        cls = type(dataset)
        if hasattr(cls, "prepare_train_data"):
            self._wrap(cls, "prepare_train_data", self._make_prepare)
        if hasattr(cls, "_rand_another"):
            self._wrap(cls, "_rand_another", self._make_rand_another)

    def _wrap(self, cls, name, maker):
        key = (cls, name)
        if key in self.wrapped:
            return
        original = getattr(cls, name)
        if getattr(original, "_petrsim_probe_original", None) is not None:
            return  # wrapped by an earlier install
        wrapper = maker(original)
        wrapper._petrsim_probe_original = original
        wrapper.__name__ = getattr(original, "__name__", name)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        setattr(cls, name, wrapper)
        self.wrapped.add(key)

    def unwrap_all(self):
        for cls, name in self.wrapped:
            current = cls.__dict__.get(name)
            original = getattr(current, "_petrsim_probe_original", None)
            if original is not None:
                setattr(cls, name, original)
        self.wrapped.clear()

    # -- the wrappers ---------------------------------------------------------------------------

    def _make_getitem(self, original):
        hooks = self

        def __getitem__(self, idx):
            if hooks.current is not None or id(self) not in hooks.tops:
                return original(self, idx)
            g = GetItem(hooks.batch, hooks.slot, int(idx), now_ns(), hooks.loader)
            hooks.slot += 1
            hooks.current = g
            try:
                result = original(self, idx)
            except (LivelockError, StallError):
                hooks.current = None  # (recorded by the watchdog that raised it)
                raise
            except BaseException as e:
                hooks.current = None
                if g.take():
                    hooks.finish(g, error="{}: {}".format(type(e).__name__, e)[:500])
                raise
            hooks.current = None
            if g.take():
                hooks.finish(g)
            return result

        return __getitem__

    def _make_prepare(self, original):
        hooks = self

        def prepare_train_data(self, index):
            g = hooks.current
            leaf = hooks.leaves.get(id(self)) if g is not None else None
            if leaf is None:
                return original(self, index)
            data = original(self, index)
            accepted = data is not None
            global_index = leaf.offset + int(index)
            g.attempts.append([global_index, _gt_count(data) if accepted else 0, accepted, -1])
            g.count += 1
            g.last_index = global_index
            if not accepted:
                hooks.check_livelock(g, leaf, int(index), global_index)
            return data

        return prepare_train_data

    def _make_rand_another(self, original):
        hooks = self

        def _rand_another(self, idx):
            result = original(self, idx)
            g = hooks.current
            leaf = hooks.leaves.get(id(self)) if g is not None else None
            if leaf is not None and g.attempts:
                g.attempts[-1][3] = leaf.offset + int(result)
            return result

        return _rand_another

    # -- recording ------------------------------------------------------------------------------

    def finish(self, g, error="", completed=True):
        """Records the getitem's attempt events (when it resampled) and its load slice."""
        rec = self.probe.recorder
        worker = rec.role
        end = now_ns()
        attempts = g.count if g.count else 1
        final_index = -1
        if g.attempts and g.attempts[-1][2]:
            final_index = g.attempts[-1][0]
        elif not g.attempts and not error and completed:
            final_index = g.index  # not an mmdet3d-style dataset: one load, the index itself
        if g.count > 1 or not completed:
            for global_index, gt, accepted, to in g.attempts[:ATTEMPT_EVENTS_MAX]:
                rec.event(wire.GETITEM_ATTEMPT, end, end, worker=worker, iteration=g.batch,
                          slot=g.slot, index=global_index, gt_count=gt, accepted=accepted,
                          final_index=-1 if accepted else to, loader=g.loader)
        rec.event(wire.LOAD, g.start_ns, end, worker=worker, iteration=g.batch, slot=g.slot,
                  index=g.index, final_index=final_index, attempts=attempts, completed=completed,
                  text=error, loader=g.loader)

    def check_livelock(self, g, leaf, local, global_index):
        """The watchdog: after a rejected attempt, stop a getitem that has drawn only from one
        resample pool, every frame of which it has seen had no GT, for the configured bounds."""
        flag_value = int(leaf.flag[local]) if leaf.flag is not None else None
        if g.pool_leaf is None:
            g.pool_leaf, g.pool_flag = leaf, flag_value
        elif g.pool_leaf is not leaf or g.pool_flag != flag_value:
            g.one_pool = False
        g.seen.add(global_index)
        probe = self.probe
        if not g.one_pool or g.count < probe.livelock_attempts:
            return
        elapsed_s = (now_ns() - g.start_ns) / 1e9
        if elapsed_s < probe.livelock_seconds:
            return
        pool = self.describe_pool(g)
        # Every frame of the pool seen without GT proves the loop cannot end (the GT count of a
        # frame does not depend on the random augmentations, which run after the filters). Where
        # the pool is not known (no flag) or not yet covered, ten times the attempts bound.
        if pool["seen"] < pool["frames"] and g.count < 10 * probe.livelock_attempts:
            return
        probe.livelock(g, pool, elapsed_s)

    def describe_pool(self, g):
        leaf = g.pool_leaf
        if leaf.flag is not None:
            members = np.flatnonzero(leaf.flag == g.pool_flag)
            first, last, frames = (leaf.offset + int(members[0]), leaf.offset + int(members[-1]),
                                   len(members))
            contiguous = frames == last - first + 1
        else:
            first, last = min(g.seen), max(g.seen)
            frames, contiguous = len(g.seen), False
        return dict(subdataset=leaf.subdataset, subdataset_name=leaf.name, group=g.pool_flag,
                    first=first, last=last, frames=frames, contiguous=contiguous,
                    seen=len(g.seen))

    def pool_text(self, pool):
        where = "dataset indices {}..{}".format(pool["first"], pool["last"])
        if not pool["contiguous"]:
            where += " (not contiguous)"
        group = "sampler group {} of ".format(pool["group"]) if pool["group"] is not None else ""
        seen = ("all {} seen, none with GT".format(pool["frames"]) if pool["seen"] >= pool["frames"]
                else "{} of them seen, none with GT".format(pool["seen"]))
        return "{}sub-dataset {} '{}', {}, {} frames; {}".format(
            group, pool["subdataset"], pool["subdataset_name"], where, pool["frames"], seen)

    def group_of(self, index, dataset_id):
        """The sampler group of a dataset index of a DataLoader's dataset: the top-level dataset's
        `flag` (mmdet's ConcatDataset concatenates its sub-datasets' flags), else its leaf's own."""
        top = self.tops.get(dataset_id)
        if top is None:
            return -1
        flag = top.flag
        if flag is not None:
            return int(flag[index]) if 0 <= index < len(flag) else -1
        for leaf in top.leaves:
            if leaf.offset <= index < leaf.offset + leaf.size and leaf.flag is not None:
                return int(leaf.flag[index - leaf.offset])
        return -1

    def new_batch(self, batch, loader=None):
        self.batch = batch
        self.slot = 0
        if loader is not None:
            self.loader = loader
