#!/usr/bin/env python3
"""Writes expected.json: what real Python makes of each config here (our own test files, so running
them in this test-only script is fine), as petrsim's ConfigValue::Repr prints it: Python's repr,
with int dict keys as their text (petrsim's documented rule). Keys of modules, functions, classes
and names starting with '__' are left out (mmcv 1.x's _file2dict drops the first two; petrsim keeps
classes as unknown values, checked in evaluator_test.cc). imports.py is not run (its imports are
unknown to petrsim by design).
Usage: make_expected.py  (rewrites expected.json beside it)
"""
import json
import os
import runpy
import types

HERE = os.path.dirname(os.path.abspath(__file__))


def plain(v):
    if isinstance(v, dict):
        return {str(k) if isinstance(k, int) and not isinstance(k, bool) else k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, tuple):
        return tuple(plain(x) for x in v)
    return v


def main():
    out = {}
    for name in sorted(os.listdir(HERE)):
        if not name.endswith('.py') or name in ('make_expected.py', 'imports.py'):
            continue
        values = runpy.run_path(os.path.join(HERE, name))
        out[name] = {k: repr(plain(v)) for k, v in values.items()
                     if not k.startswith('__') and not isinstance(v, (types.ModuleType, types.FunctionType, type))}
    with open(os.path.join(HERE, 'expected.json'), 'w') as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write('\n')


if __name__ == '__main__':
    main()
