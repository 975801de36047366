"""python -m petrsim_probe --trace-dir DIR [options] -- SCRIPT [ARGS...]   (or -m MODULE ARGS...)

Runs a training script with the probe installed, without editing it; under torchrun:
    torchrun --nproc_per_node N --redirects 2 --tee 2 -m petrsim_probe --trace-dir DIR -- train.py ...
Installed (`pip install ./probe`), the same launcher is the `petrsim-probe` command:
    torchrun --nproc_per_node N --redirects 2 --tee 2 --no_python petrsim-probe --trace-dir DIR -- train.py ...
"""

import argparse
import os
import runpy
import sys


def main(argv=None, prog="python -m petrsim_probe"):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" in argv:
        cut = argv.index("--")
        ours, target = argv[:cut], argv[cut + 1:]
    else:
        ours, target = argv, []
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run a PyTorch training script with petrsim_probe recording petrsim traces.",
        epilog="Everything after `--` is the script and its arguments (or -m MODULE ARGS).")
    parser.add_argument("--trace-dir", required=True, help="directory for rank_<r>.pbtrace")
    parser.add_argument("--scenario", help="a binary petrsim scenario (.pb) or a petrsim trace whose "
                                           "header holds one, embedded in every trace header")
    parser.add_argument("--livelock-attempts", help="watchdog: loads without GT from one pool "
                                                    "(default 100)")
    parser.add_argument("--livelock-seconds", help="watchdog: seconds spent in them (default 5); "
                                                   "also the bound after which a DataLoader "
                                                   "worker's __getitem__ that has not returned "
                                                   "gets its Python stack recorded (a stall)")
    parser.add_argument("--stop-stalls", action="store_true", default=None,
                        help="also stop such a worker (a StallError; the rank fails at once), as "
                             "the livelock watchdog does")
    args = parser.parse_args(ours)
    if not target:
        parser.error("expected `-- SCRIPT [ARGS...]` (or `-- -m MODULE [ARGS...]`) after the options")

    import petrsim_probe

    try:
        petrsim_probe.install(args.trace_dir, scenario=args.scenario,
                              livelock_attempts=args.livelock_attempts,
                              livelock_seconds=args.livelock_seconds,
                              stop_stalls=args.stop_stalls)
    except petrsim_probe.ProbeError as e:
        sys.stderr.write("{}\n".format(e))
        return 2
    if target[0] == "-m":
        if len(target) < 2:
            parser.error("-m needs a module name")
        sys.argv = [target[1]] + target[2:]
        runpy.run_module(target[1], run_name="__main__", alter_sys=True)
        return 0
    script = target[0]
    if not os.path.isfile(script):
        sys.stderr.write("{}: {}: no such script\n".format(prog, script))
        return 2
    sys.argv = target
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")
    return 0


def entry_point():
    """The `petrsim-probe` console script (probe/pyproject.toml): main() with the search path
    `python -m petrsim_probe` has. The script wrapper pip writes puts its own directory (the
    environment's bin/) first on sys.path, where `python -m` puts the current directory; the
    current directory goes back there, so a `-- -m MODULE` target importable from it (and a
    script's imports) resolve the same either way."""
    if sys.path and sys.argv and sys.argv[0] and \
            os.path.abspath(sys.path[0] or ".") == os.path.dirname(os.path.abspath(sys.argv[0])):
        sys.path[0] = os.getcwd()
    return main(prog="petrsim-probe")


if __name__ == "__main__":
    sys.exit(main())
