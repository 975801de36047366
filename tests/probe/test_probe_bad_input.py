#!/usr/bin/python3
"""Bad input to the probe is a clear error naming what is wrong: a trace directory that is a file
or cannot be made, bounds that are not numbers or out of range, a text scenario where a binary
one or a trace is expected, `python -m petrsim_probe` without a script (exit 2). No job runs.

  python3 tests/probe/test_probe_bad_input.py --petrsim build/petrsim
"""

import os
import subprocess
import sys

import probe_testlib as lib
from probe_testlib import Failure

CASES = [
    (dict(trace_dir="{tmp}/file"), "exists and is not a directory"),
    (dict(trace_dir="{tmp}/file/sub"), "cannot create it"),
    (dict(trace_dir="{tmp}/t", livelock_attempts=0), "livelock_attempts: expected a whole number >= 1, got 0"),
    (dict(trace_dir="{tmp}/t", livelock_attempts="ten"), "livelock_attempts: expected a whole number >= 1"),
    (dict(trace_dir="{tmp}/t", livelock_seconds=-1), "livelock_seconds: expected a number of seconds >= 0, got -1"),
    (dict(trace_dir="{tmp}/t", livelock_seconds="abc"), "livelock_seconds: expected a number of seconds"),
    (dict(trace_dir="{tmp}/t", scenario=lib.SCENARIO), "expected a binary scenario (.pb) or a petrsim trace"),
    (dict(trace_dir="{tmp}/t", scenario="{tmp}/missing.pb"), "missing.pb: cannot read"),
    (dict(trace_dir=""), "expected a trace directory"),
]


def body(args, tmp):
    with open(os.path.join(tmp, "file"), "w") as f:
        f.write("x")
    code = ("import sys, json; sys.path.insert(0, {!r}); import petrsim_probe\n"
            "kw = json.loads(sys.argv[1])\n"
            "try:\n    petrsim_probe.install(**kw)\nexcept petrsim_probe.ProbeError as e:\n"
            "    print(e); sys.exit(3)\nprint('installed'); sys.exit(0)\n").format(lib.PROBE_DIR)
    import json
    for kwargs, expected in CASES:
        kwargs = {k: v.format(tmp=tmp) if isinstance(v, str) else v for k, v in kwargs.items()}
        r = subprocess.run([sys.executable, "-c", code, json.dumps(kwargs)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out = r.stdout.decode()
        if r.returncode != 3 or expected not in out:
            raise Failure("install({}) exited {}: expected a ProbeError saying `{}`, got:\n{}".format(
                kwargs, r.returncode, expected, out))
    env = dict(os.environ, PYTHONPATH=lib.PROBE_DIR)
    for argv, expected in ((["--trace-dir", tmp + "/t"], "expected `-- SCRIPT"),
                           (["--trace-dir", tmp + "/t", "--livelock-seconds", "-1", "--", "x.py"],
                            "livelock_seconds"),
                           (["--trace-dir", tmp + "/t", "--", tmp + "/nope.py"], "no such script")):
        r = subprocess.run([sys.executable, "-m", "petrsim_probe"] + argv, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if r.returncode != 2 or expected not in r.stdout.decode():
            raise Failure("python -m petrsim_probe {}: exit {}, expected 2 and `{}`:\n{}".format(
                " ".join(argv), r.returncode, expected, r.stdout.decode()))
    print("  {} bad calls of install() and 3 of python -m petrsim_probe refused with the "
          "message".format(len(CASES)))


if __name__ == "__main__":
    lib.run_test("probe bad input", body)
