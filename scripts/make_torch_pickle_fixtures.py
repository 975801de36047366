#!/usr/bin/python3
"""Writes the torch fixtures of the pickle reader's unit tests (tests/data/pickle_torch/).

Run with Debian's interpreter (python3-torch 1.13, python3-numpy), from anywhere:
    /usr/bin/python3 scripts/make_torch_pickle_fixtures.py

Every file is written by the real torch through plain pickle.dump, in protocol 2 (what mmcv 1.x's
dump uses, and so what Far3D's Argoverse 2 infos are) and protocol 4 (the default of Python 3.8+):
  tensors_p{2,4}.pkl     {'f32': float32 (2, 3), 'i64': int64 (4,), 'bool': bool (2, 2),
                          'f64_scalar': a 0-d float64, 'offset': arange(10)[3:7] (a contiguous
                          view at storage offset 3), 'nested': tensors inside dicts and lists}
  transposed_p{2,4}.pkl  a transposed (3, 2) view: not C-contiguous, refused
  strided_p{2,4}.pkl     arange(6)[::2]: stride 2, refused
  float16_p{2,4}.pkl     a float16 tensor (torch.HalfStorage): a dtype petrsim does not read
  complex64_p{2,4}.pkl   a complex64 tensor (torch.ComplexFloatStorage): likewise
  opaque_p{2,4}.pkl      {'path': PosixPath('/a/b') (REDUCE), 'namespace': argparse.Namespace(a=1)
                          (NEWOBJ then BUILD), 'paths': [PosixPath('/c'), 'x'], 'value': 42}:
                          objects a caller lists in PickleOptions::opaque_globals, beside data
  records_p{2,4}.pkl     {'infos': [{'token', 'gt_boxes' (a tensor), 'path' (a PosixPath),
                          'ignored' (a tensor)}, x3]}: the importer's record mode over tensors and
                          opaque objects whose globals are memoized once and fetched again
  expected.json          the readable tensors' dtype, shape and values (C order), taken from the
                         tensors themselves, keyed by their path in tensors_p*.pkl ('nested/a/0')

A storage's key inside its torch.save stream is derived from a memory address, so a rerun writes
different bytes with the same meaning. Nothing here is ever loaded by the tests' reader as Python.
"""

import argparse
import json
import os
import pathlib
import pickle

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "pickle_torch")
PROTOCOLS = (2, 4)


def readable_tensors():
    f32 = torch.tensor([[1.5, -2.25, 3.0], [1e-3, 65504.0, -0.0]], dtype=torch.float32)
    i64 = torch.tensor([0, -1, 2**40, -(2**62)], dtype=torch.int64)
    flags = torch.tensor([[True, False], [False, True]])
    scalar = torch.tensor(0.1, dtype=torch.float64)
    offset = torch.arange(10, dtype=torch.int64)[3:7]
    assert offset.is_contiguous() and offset.storage_offset() == 3
    nested = {
        "boxes": [torch.tensor([[0.5, 1.5]], dtype=torch.float32), {"deep": torch.tensor([7, 8], dtype=torch.int32)}],
        "count": 3,
    }
    return {"f32": f32, "i64": i64, "bool": flags, "f64_scalar": scalar, "offset": offset, "nested": nested}


def expected(value, path, out):
    if isinstance(value, torch.Tensor):
        out[path] = {
            "dtype": str(value.dtype).replace("torch.", ""),
            "shape": list(value.shape),
            "values": value.reshape(-1).tolist(),
        }
    elif isinstance(value, dict):
        for key, item in value.items():
            expected(item, f"{path}/{key}" if path else key, out)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            expected(item, f"{path}/{index}", out)


def main():
    os.makedirs(OUT, exist_ok=True)
    base = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    refused = {
        "transposed": base.t(),
        "strided": torch.arange(6, dtype=torch.int64)[::2],
        "float16": torch.tensor([1.0, 2.0], dtype=torch.float16),
        "complex64": torch.tensor([1 + 2j], dtype=torch.complex64),
    }
    assert not refused["transposed"].is_contiguous() and not refused["strided"].is_contiguous()
    opaque = {
        "path": pathlib.PosixPath("/a/b"),
        "namespace": argparse.Namespace(a=1),
        "paths": [pathlib.PosixPath("/c"), "x"],
        "value": 42,
    }
    records = {
        "infos": [
            {
                "token": f"t{i}",
                "gt_boxes": torch.arange(i * 3, i * 3 + 3, dtype=torch.float32).reshape(1, 3),
                "path": pathlib.PosixPath(f"/logs/{i}"),
                "ignored": torch.zeros(2, dtype=torch.int64),
            }
            for i in range(3)
        ]
    }
    for protocol in PROTOCOLS:
        files = {"tensors": readable_tensors(), "opaque": opaque, "records": records, **refused}
        for name, value in files.items():
            with open(os.path.join(OUT, f"{name}_p{protocol}.pkl"), "wb") as f:
                pickle.dump(value, f, protocol=protocol)
    values = {}
    expected(readable_tensors(), "", values)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump({"torch_version": torch.__version__, "tensors": values}, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
