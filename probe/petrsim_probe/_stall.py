"""The stall watcher: a thread in each recorded DataLoader worker that samples the Python stack of
a __getitem__ that has not returned for the stall bound, and writes the getitem in flight when the
worker is left behind by its rank's main process.

Any dataset: the watcher needs no resample loop, only the getitem the dataset hooks bracket
(`DatasetHooks.current`, with the ident of the thread running it). Every `period` seconds (a
quarter of the bound, within 0.05 .. 0.5 s) it looks at the getitem in flight; once one has run
for `livelock_seconds`, it reads that thread's frame from `sys._current_frames()` (standard
library; the worker's main thread keeps running, the GIL is held only while the frames are read)
and records a `stall` slice (getitem start to the sample) whose text is the stack, innermost
frame last, one "file:line in func" per line, the probe's own frames left out. Once per getitem:
a getitem that returns afterwards is a completed `load` after the stall, so a reader can tell a
slow load from one that never returned.

With `stop_stalls` the worker is then stopped as the livelock watchdog stops one: a `watchdog`
event naming it, the open `load` written completed=false, a flush, and a StallError raised in the
worker's main thread (through SIGUSR2, whose handler the worker installs: a signal also ends a
blocking system call, where an exception set from another thread would wait for it to return).
The DataLoader hands it to the main process and the rank fails at once. Not by default: a
getitem that runs long is no proof it never returns (a cold cache, a slow file system), and a
probe must not fail a job that would have gone on.

A worker whose main process has ended (killed, or died) while a getitem was in flight never
returns to the loop where torch would see its parent gone: the watcher writes that getitem as an
incomplete `load` and ends the worker.
"""

import os
import select
import signal
import sys
import threading
import time
import traceback

from . import wire
from ._recorder import now_ns

STACK_FRAMES_MAX = 64
STOP_SIGNAL = signal.SIGUSR2
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def format_stack(frame):
    """The stack from `frame` outwards as text: outermost first, innermost last, one
    "file:line in func" per line, at most STACK_FRAMES_MAX innermost frames, the probe's own
    wrappers left out."""
    summary = traceback.StackSummary.extract(traceback.walk_stack(frame), lookup_lines=False)
    lines = []
    for entry in reversed(summary):  # walk_stack goes outwards from the innermost frame
        if os.path.dirname(os.path.abspath(entry.filename)) == _PACKAGE_DIR:
            continue
        lines.append("{}:{} in {}".format(entry.filename, entry.lineno, entry.name))
    return "\n".join(lines[-STACK_FRAMES_MAX:])


def sample_stack(thread_ident):
    frame = sys._current_frames().get(thread_ident)
    if frame is None:
        return ""
    try:
        return format_stack(frame)
    finally:
        del frame


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class StallWatch:
    def __init__(self, probe, main_pid, wakeup_fd=None):
        self.probe = probe
        self.wakeup_fd = wakeup_fd  # the worker's signal wakeup fd (SIGTERM while blocked)
        self.bound_ns = int(probe.livelock_seconds * 1e9)
        self.period = min(0.5, max(0.05, probe.livelock_seconds / 4.0))
        self.parent = os.getppid()
        # The rank's main process: the parent of a forked or spawned worker, not of a forkserver
        # one (whose parent is the fork server).
        self.main_pid = main_pid

    def start(self):
        threading.Thread(target=self._run, name="petrsim_probe stall watch", daemon=True).start()

    def _orphaned(self):
        if os.getppid() != self.parent:
            return True
        return self.main_pid not in (None, self.parent) and not _alive(self.main_pid)

    def _run(self):
        try:
            while True:
                self._wait()
                if self._orphaned():
                    self._end_orphaned()
                    return
                g = self.probe.datasets.current
                if g is None:
                    continue
                t = now_ns()
                if not g.stalled:
                    if t - g.start_ns >= self.bound_ns:
                        g.stalled = True
                        self.probe.stall(g)
                elif g.stop_sent_ns is not None and t - g.stop_sent_ns >= max(self.bound_ns, 10**9):
                    # The StallError did not end the getitem (the dataset caught it): again.
                    g.stop_sent_ns = t
                    signal.pthread_kill(g.thread, STOP_SIGNAL)
        except Exception as e:  # noqa: BLE001 - the watcher must never take the worker down
            sys.stderr.write("petrsim_probe: the stall watcher of DataLoader worker {} stopped: "
                             "{}: {}\n".format(self.probe.recorder.role, type(e).__name__, e))

    def _wait(self):
        """One period; a SIGTERM arriving meanwhile ends the worker here if the main thread is
        blocked in C (where its Python handler would wait)."""
        if self.wakeup_fd is None:
            time.sleep(self.period)
            return
        deadline = time.monotonic() + self.period
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            readable, _, _ = select.select([self.wakeup_fd], [], [], left)
            if not readable:
                return
            data = os.read(self.wakeup_fd, 64)
            if signal.SIGTERM in data:
                time.sleep(0.2)  # the main thread's handler first, if it can run
                self.probe.worker_terminated()

    def _end_orphaned(self):
        """The rank's main process is gone: the getitem in flight will never be consumed."""
        probe = self.probe
        g = probe.datasets.current
        if g is None or not g.take():
            probe.recorder.flush()
            return  # idle: torch's worker loop sees its parent gone and ends
        probe.datasets.finish(g, completed=False)
        probe.recorder.flush()
        os._exit(1)


def stall_event(probe, g, stack, t):
    rec = probe.recorder
    index = g.loading_index()
    rec.event(wire.STALL, g.start_ns, t, worker=rec.role, iteration=g.batch, slot=g.slot,
              index=g.index, final_index=index if index != g.index else -1, attempts=g.count,
              loader=g.loader, text=stack)
