#!/usr/bin/env python3
"""Writes one Flight Recorder case in the shape each PyTorch dump version writes it, pickle and
JSON, so the tests can check that `petrsim diagnose` reads every version. The CONTENT (ranks,
groups, collectives, states) comes from the real 2.9 pickles in tests/data/flight_recorder/nvrx
(a copy of ../shared/fixtures); the SHAPE (which keys, in which order, of which type) follows the
writer's source, cited at each step below (docs/research/flight_recorder_formats.md gives the
evidence per version). Run once from the project root; the output is committed:
    python3 tests/data/flight_recorder_json/make_versioned.py lock_gil_2nd
writes tests/data/flight_recorder_json/<version>/{pickle/_dump_N, json/_dump_N.json} for the
versions below, and bare_list/pickle/_dump_N (no JSON writer existed then).

Sources read (stored copies of pytorch/pytorch, see the note for how each was found):
  [S2.2]  torch/csrc/distributed/c10d/NCCLUtils.hpp, version_val "2.2": NCCLTraceBuffer::dump,
          getCollectiveTrace, getPgConfig (pickle only: no dump_json, no pg_status).
  [S2.3]  torch/csrc/distributed/c10d/NCCLUtils.hpp, version_val "2.3": adds getPgStatus /
          getPgStatusJson and the declaration of dump_json; no library-version key.
  [S2.7]  torch/csrc/distributed/c10d/FlightRecorder.hpp, version_val "2.7", nccl_version_key;
          FlightRecorder.cpp get_dump_json / get_dump (no thread_name / thread_id).
  [S2.10] torch/csrc/distributed/c10d/FlightRecorderDetail.hpp (pytorch/pytorch cb41e3a4),
          FlightRecorder.hpp version_val "2.10", comm_lib_version_key: dump_json / dump /
          getCollectiveTrace / getPgConfigJson / getPgStatusJson.
  [PR110960] pytorch/pytorch#110960 (the first recorder, Oct 2023): the dump is a list of dicts
          {pg_id, seq_id, profiling_name, sizes, state, frames}.
"""
import json
import os
import pickle
import sys

case = sys.argv[1] if len(sys.argv) > 1 else "lock_gil_2nd"
source = os.path.join("tests", "data", "flight_recorder", "nvrx", case)
target_root = os.path.join("tests", "data", "flight_recorder_json")

# Per version: the library-version key (None: not written) and whether entries carry
# thread_name / thread_id.
#   2.2, 2.3: no library-version key ([S2.2], [S2.3]: dump() inserts version, pg_config,
#             [pg_status], entries only).
#   2.7:      result[nccl_version_key_str] = obj.nccl_version_ ([S2.7] get_dump_json);
#             result.insert(nccl_version_key_str, ...) after pg_config in get_dump.
#   2.10:     result[comm_lib_version_key_str] = comm_lib_version_ ([S2.10] dump_json);
#             dump() inserts it after pg_config. Entries gain thread_name, thread_id
#             ([S2.10] getCollectiveTrace: dict.insert(thread_name_key, ...),
#             dict.insert(thread_id_key, c10::str(e.thread_id_))).
VERSIONS = {
    "2.2": {"lib_key": None, "threads": False, "pg_status": False, "json": False},
    "2.3": {"lib_key": None, "threads": False, "pg_status": True, "json": True},
    "2.7": {"lib_key": "nccl_version", "threads": False, "pg_status": True, "json": True},
    "2.10": {"lib_key": "comm_lib_version", "threads": True, "pg_status": True, "json": True},
}


def ranks_of(real, name):
    # pg_config ranks: ranks_str(ranks), a str like "[0, 1, 2]" in both formats
    # ([S2.10] getPgConfig: pg_info.insert("ranks", ranks_str(ranks)); getPgConfigJson the same
    # into std::map<std::string, std::string>).
    return real["pg_config"][name]["ranks"]


def pickle_entry(e, v):
    # Insertion order of getCollectiveTrace ([S2.2]..[S2.10]); c10::Dict keeps it in the pickle.
    d = {}
    # frames: only with includeStackTraces; the source dumps hold them (often empty lists).
    if "frames" in e:
        d["frames"] = e["frames"]
    d["record_id"] = int(e["record_id"])
    d["pg_id"] = int(e["pg_id"])
    d["process_group"] = tuple(e["process_group"])  # e.pg_name_, std::tuple -> pickle tuple
    if v["threads"]:
        d["thread_name"] = e.get("thread_name", "python3")
        d["thread_id"] = str(e.get("thread_id", "0"))  # c10::str(e.thread_id_): a str
    d["collective_seq_id"] = int(e["collective_seq_id"])
    d["p2p_seq_id"] = int(e["p2p_seq_id"])
    d["op_id"] = int(e["op_id"])
    d["profiling_name"] = e["profiling_name"]
    d["time_created_ns"] = int(e["time_created_ns"])
    if e.get("duration_ms") is not None:  # if (e.duration_) dict.insert(duration_key, ...)
        d["duration_ms"] = float(e["duration_ms"])
    d["input_sizes"] = [list(s) for s in e["input_sizes"]]
    d["input_dtypes"] = list(e["input_dtypes"])
    d["output_sizes"] = [list(s) for s in e["output_sizes"]]
    d["output_dtypes"] = list(e["output_dtypes"])
    d["state"] = e["state"]
    # time_discovered_*: int64 or c10::IValue() (None) in the pickle.
    d["time_discovered_started_ns"] = e.get("time_discovered_started_ns")
    d["time_discovered_completed_ns"] = e.get("time_discovered_completed_ns")
    d["retired"] = bool(e["retired"])
    d["timeout_ms"] = int(e["timeout_ms"])
    d["is_p2p"] = bool(e["is_p2p"])
    return d


def json_entry(e, v):
    # dump_json ([S2.10] / [S2.7] get_dump_json): j[...] = ... into an nlohmann::json object,
    # whose keys come out sorted (std::map); no frames key at all (the JSON dump never writes
    # stack traces, pytorch/pytorch#129505).
    j = {
        "record_id": int(e["record_id"]),
        "pg_id": int(e["pg_id"]),
        "process_group": list(e["process_group"]),  # std::tuple -> JSON array
        "collective_seq_id": int(e["collective_seq_id"]),
        "p2p_seq_id": int(e["p2p_seq_id"]),
        "op_id": int(e["op_id"]),
        "profiling_name": e["profiling_name"],
        "time_created_ns": int(e["time_created_ns"]),
        "input_sizes": [list(s) for s in e["input_sizes"]],
        "input_dtypes": list(e["input_dtypes"]),
        "output_sizes": [list(s) for s in e["output_sizes"]],
        "output_dtypes": list(e["output_dtypes"]),
        "state": e["state"],
        # j[time_discovered_*_key_str] = has_value() ? int64_t(...) : 0  -- never null.
        "time_discovered_started_ns": int(e.get("time_discovered_started_ns") or 0),
        "time_discovered_completed_ns": int(e.get("time_discovered_completed_ns") or 0),
        "retired": bool(e["retired"]),
        "timeout_ms": int(e["timeout_ms"]),
        "is_p2p": bool(e["is_p2p"]),
    }
    if v["threads"]:
        j["thread_name"] = e.get("thread_name", "python3")
        j["thread_id"] = str(e.get("thread_id", "0"))
    if e.get("duration_ms") is not None:
        j["duration_ms"] = float(e["duration_ms"])
    return j


def pickle_dump(real, version, v):
    # dump() / get_dump(): result.insert in this order ([S2.10]: version, pg_config,
    # comm_lib_version, pg_status, entries; [S2.7]: nccl_version in the same place; [S2.3]:
    # version, pg_config, pg_status, entries; [S2.2]: version, pg_config, entries).
    out = {"version": version}
    out["pg_config"] = {
        name: {"name": name, "desc": c["desc"], "ranks": ranks_of(real, name)} for name, c in real["pg_config"].items()
    }
    if v["lib_key"]:
        out[v["lib_key"]] = real.get("nccl_version") or real.get("comm_lib_version") or ""
    if v["pg_status"]:
        # getPgStatus: ints (lastEnqueuedSeq, ...), keys std::to_string(pg_id).
        out["pg_status"] = {
            str(k): {
                "last_enqueued_collective": int(s["last_enqueued_collective"]),
                "last_started_collective": int(s["last_started_collective"]),
                "last_completed_collective": int(s["last_completed_collective"]),
            }
            for k, s in real["pg_status"].items()
        }
    # includeCollectives (the default): entries is always inserted, even empty.
    out["entries"] = [pickle_entry(e, v) for e in real["entries"]]
    return out


def json_dump(real, version, v):
    # dump_json ([S2.10] / [S2.7] get_dump_json; [S2.3] the same without a library key).
    out = {"version": version}
    if v["lib_key"]:
        out[v["lib_key"]] = real.get("nccl_version") or real.get("comm_lib_version") or ""
    out["pg_config"] = {
        name: {"name": name, "desc": c["desc"], "ranks": ranks_of(real, name)} for name, c in real["pg_config"].items()
    }
    # getPgStatusJson: std::map<std::string, std::map<std::string, std::string>>, every value
    # std::to_string(status->last*Seq): decimal strings, not ints.
    out["pg_status"] = {
        str(k): {
            "last_enqueued_collective": str(int(s["last_enqueued_collective"])),
            "last_started_collective": str(int(s["last_started_collective"])),
            "last_completed_collective": str(int(s["last_completed_collective"])),
        }
        for k, s in real["pg_status"].items()
    }
    entries = [json_entry(e, v) for e in real["entries"]]
    if entries:  # if (!entries.empty()) result[entries_key_str] = entries;
        out["entries"] = entries
    return out


def bare_list(real):
    # [PR110960]: the dump is the list itself; each entry {pg_id, seq_id, profiling_name,
    # sizes (flat, the first tensor's), state, frames}. pg_id is the local index (ProcessGroupNCCL::uid_,
    # a per-process counter): the group's name did not exist yet, so one local index names different
    # groups on different ranks here, and no dump says a group's members (the reader matches groups
    # across ranks by their calls: MatchBareListGroups in formats/flight_recorder/flight_recorder.h).
    out = []
    for e in real["entries"]:
        out.append(
            {
                "pg_id": int(e["pg_id"]),
                "seq_id": int(e["collective_seq_id"]),
                "profiling_name": e["profiling_name"],
                "sizes": list(e["input_sizes"][0]) if e["input_sizes"] else [],
                "state": e["state"],
                "frames": e.get("frames", []),
            }
        )
    return out


def write_pickle(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(value, f, protocol=2)  # pickle_str(): torch::jit::Pickler, protocol 2


def write_json(path, value):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        # result.dump(): compact, keys sorted (nlohmann::json objects are std::map), UTF-8 as is.
        f.write(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False))


for name in sorted(os.listdir(source)):
    if not name.startswith("_dump_"):
        continue
    with open(os.path.join(source, name), "rb") as f:
        real = pickle.load(f)
    for version, v in VERSIONS.items():
        write_pickle(os.path.join(target_root, version, "pickle", name), pickle_dump(real, version, v))
        if v["json"]:
            write_json(os.path.join(target_root, version, "json", name + ".json"), json_dump(real, version, v))
    write_pickle(os.path.join(target_root, "bare_list", "pickle", name), bare_list(real))
