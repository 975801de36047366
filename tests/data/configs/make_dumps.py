#!/usr/bin/env python3
"""Regenerates the expected values of tests/mmdet_config_test.cc with mmcv 1.x's own Config code:
dumps/<config>.json (what cfg.dump('x.json') writes: json.dump of the merged dict) and
logs/<config>_mmcv.log (a training log whose `Config:` block is cfg.pretty_text, with
cfg.gpu_ids = range(0, 8) as mmdet's tools/train.py sets it), for the configs in streampetr/.

Usage: make_dumps.py [PATH_OF_MMCV_1X_UTILS_CONFIG_PY]
With mmcv 1.x installed (pip install mmcv==1.7.2) it uses mmcv.Config. Otherwise give the path of
mmcv 1.x's mmcv/utils/config.py (git show 1.x:mmcv/utils/config.py in a clone of
open-mmlab/mmcv): it is loaded with small stand-ins for addict.Dict and yapf, so pretty_text comes
out as mmcv's text before yapf reformats it (the same Python). It executes the configs here, which
are petrsim's own test files.
"""
import importlib.util
import json
import os
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = ['stream_petr_r50_704_bs2_seq_24e', 'stream_petr_vov_800_bs2_seq_24e', 'stream_petr_r50_704_trainval_24e']


def load_config_class(config_py):
    if config_py is None:
        from mmcv import Config  # noqa: F401 (mmcv 1.x)
        return Config

    class Dict(dict):  # the part of addict.Dict mmcv's ConfigDict uses
        def __init__(self, *args, **kwargs):
            super().__init__()
            for key, value in dict(*args, **kwargs).items():
                self[key] = self._hook(value)

        @classmethod
        def _hook(cls, item):
            if isinstance(item, dict):
                return cls(item)
            if isinstance(item, (list, tuple)):
                return type(item)(cls._hook(e) for e in item)
            return item

        def __getattr__(self, name):
            return self.__getitem__(name)

        def __setattr__(self, name, value):
            self[name] = self._hook(value)

        def to_dict(self):
            def plain(v):
                if isinstance(v, Dict):
                    return v.to_dict()
                if isinstance(v, (list, tuple)):
                    return type(v)(plain(e) for e in v)
                return v
            return {k: plain(v) for k, v in self.items()}

    addict = types.ModuleType('addict')
    addict.Dict = Dict
    yapf = types.ModuleType('yapf')
    yapf.__version__ = '0.40.2'
    yapflib = types.ModuleType('yapf.yapflib')
    yapf_api = types.ModuleType('yapf.yapflib.yapf_api')
    yapf_api.FormatCode = lambda text, style_config=None, verify=None: (text, False)
    sys.modules.update({'addict': addict, 'yapf': yapf, 'yapf.yapflib': yapflib, 'yapf.yapflib.yapf_api': yapf_api})

    package = tempfile.mkdtemp()
    os.makedirs(os.path.join(package, 'mmcvstub'))
    with open(os.path.join(package, 'mmcvstub', '__init__.py'), 'w') as f:
        f.write('')
    with open(config_py) as src, open(os.path.join(package, 'mmcvstub', 'config.py'), 'w') as dst:
        dst.write(src.read())
    with open(os.path.join(package, 'mmcvstub', 'misc.py'), 'w') as f:
        f.write('def import_modules_from_strings(imports, allow_failed_imports=False):\n    raise RuntimeError(imports)\n')
    with open(os.path.join(package, 'mmcvstub', 'path.py'), 'w') as f:
        f.write('import os\ndef check_file_exist(filename, msg_tmpl=\'file "{}" does not exist\'):\n'
                '    if not os.path.isfile(filename):\n        raise FileNotFoundError(msg_tmpl.format(filename))\n')
    with open(os.path.join(package, 'mmcvstub', 'version_utils.py'), 'w') as f:
        f.write('def digit_version(v):\n    return tuple(int(x) for x in v.split("."))\n')
    sys.path.insert(0, package)
    module = importlib.import_module('mmcvstub.config')
    return module.Config


def main():
    Config = load_config_class(sys.argv[1] if len(sys.argv) > 1 else None)
    for name in CONFIGS:
        cfg = Config.fromfile(os.path.join(HERE, 'streampetr', name + '.py'))
        with open(os.path.join(HERE, 'dumps', name + '.json'), 'w') as f:
            json.dump(cfg._cfg_dict.to_dict(), f)
        cfg.gpu_ids = range(8)
        with open(os.path.join(HERE, 'logs', name + '_mmcv.log'), 'w') as f:
            f.write('2024-03-01 09:00:00,100 - mmdet - INFO - Distributed training: True\n')
            f.write('2024-03-01 09:00:01,200 - mmdet - INFO - Config:\n')
            f.write(cfg.pretty_text + '\n')
            f.write('2024-03-01 09:00:02,300 - mmdet - INFO - Set random seed to 0, deterministic: False\n')
            f.write('2024-03-01 09:00:40,000 - mmdet - INFO - workflow: [(\'train\', 1)], max: 42192 iters\n')


if __name__ == '__main__':
    main()
