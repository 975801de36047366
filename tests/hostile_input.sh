#!/usr/bin/env bash
# Hostile input on the real executable (issue 33, points 2, 4, 5 and 6): sizes from input are
# bounded before memory is spent, with an estimate; strings that are not UTF-8 never abort a
# --json (each is refused where it enters, exit 2); an import never writes over one of its inputs
# or over a file that is not an import's scenario; counts are refused, never cut to 32 bits; the
# options that were accepted without a word are refused with the flag or field, what was
# expected and what was found; unclear messages name the real cause.
# Usage: tests/hostile_input.sh PETRSIM WORK_DIR (from the repository root)
set -uo pipefail
petrsim=$(realpath "$1")
work=$2
repo=$(pwd)
rm -rf "$work"
mkdir -p "$work/root"
fixtures=$repo/tests/data/importers
tiny=$repo/scenarios/tiny.pbtxt
cp "$fixtures/mini_infos_val.pkl" "$work/a.pkl"
cp "$fixtures/mini_infos_train.pkl" "$work/root/nuscenes2d_temporal_infos_train.pkl"
cp "$fixtures/mini_infos_val.pkl" "$work/root/nuscenes2d_temporal_infos_val.pkl"
cp -r "$repo/tests/data/configs" "$work/configs"
config=configs/streampetr/stream_petr_r50_704_trainval_24e.py
cd "$work"

failures=0
fail() {
  echo "hostile_input: $*" >&2
  failures=$((failures + 1))
}
# expect CODE TEXT LABEL -- COMMAND...: the exit status and a text stderr (or stdout) must hold.
expect() {
  local code=$1 text=$2 label=$3
  shift 4
  "$@" >out.txt 2>err.txt
  local got=$?
  [ "$got" = "$code" ] || fail "$label: exit $got, expected $code ($(tail -c 400 err.txt))"
  [ -z "$text" ] || grep -qF -- "$text" err.txt out.txt || fail "$label: expected \"$text\" in: $(tail -c 400 err.txt)"
}

# --- Point 4: invalid UTF-8 where strings enter; --json never aborts (it was SIGABRT, 134).
expect 2 "--set name=\\xff\\xfe: not text: invalid UTF-8 at byte 5" "--set with bytes" -- \
  "$petrsim" "$tiny" --json --set $'name=\xff\xfe'
sed 's/^name: .*/name: "bad\\xff\\xfename"/' "$tiny" >bad_name.pbtxt
expect 2 "name: must be text (UTF-8): invalid UTF-8 at byte 3" "a scenario's name" -- "$petrsim" bad_name.pbtxt --json
expect 2 "must be text (UTF-8)" "check --json of the same" -- "$petrsim" check bad_name.pbtxt --json
# The same name in a binary scenario: field 1 (name), 4 bytes.
printf '\x0a\x04b\xffx\xfe' >bad_name.pb
expect 2 "name: must be text (UTF-8)" "a binary scenario's name" -- "$petrsim" plan bad_name.pb --json
# A pickle's str that is not UTF-8 (Python's load refuses it too): a stray 0xff, a surrogate.
python3 - <<'EOF'
import re
b = open('a.pkl', 'rb').read()
at = [m.start() + 5 for m in re.finditer(rb'X \x00\x00\x00[0-9a-f]{32}', b)][3]
open('ff.pkl', 'wb').write(b[:at] + b'\xff' + b[at + 1:])
open('surrogate.pkl', 'wb').write(b[:at] + b'\xed\xa0\x80' + b[at + 3:])
open('four_byte.pkl', 'wb').write(b[:at] + '\u00e9\U0001F600'.encode() + b[at + 6:])
EOF
expect 2 "a str that is not valid UTF-8 (Python refuses to load it): invalid UTF-8 at byte 0 of 32" "pickle 0xff" -- \
  "$petrsim" import mmdet3d-infos ff.pkl -o ff.pbtxt --quiet --no-cache
[ ! -e ff.pbtxt ] || fail "a refused import wrote ff.pbtxt"
expect 2 "('\\xed\\xa0\\x80" "pickle surrogate" -- "$petrsim" import mmdet3d-infos surrogate.pkl -o s.pbtxt --quiet --no-cache
expect 0 "" "valid 2- and 4-byte UTF-8 in a pickle" -- \
  "$petrsim" import mmdet3d-infos four_byte.pkl -o four_byte.pbtxt --quiet --no-cache
expect 1 "" "--json of a scenario with them" -- "$petrsim" four_byte.pbtxt --json --set job.world_size=2
# An info file whose name is not UTF-8: its sub-dataset name is the escaped name, and --json works.
cp a.pkl $'bad\xffname.pkl'
expect 0 "bad\\xffname" "import of bad\\xffname.pkl" -- \
  "$petrsim" import mmdet3d-infos $'bad\xffname.pkl' -o bad_file.pbtxt --quiet --no-cache
expect 1 "bad\\\\xffname" "--json on its scenario" -- "$petrsim" bad_file.pbtxt --json --set job.world_size=2
python3 -c "import json,sys; json.load(open('out.txt'))" || fail "--json on bad_file.pbtxt is not JSON"
expect 2 "--name 'x\\xff': not text" "--name with bytes" -- \
  "$petrsim" import mmdet3d-infos a.pkl --name $'x\xff' -o n.pbtxt --quiet --no-cache

# --- Point 5: outputs that would lose an input.
cp a.pkl a.keep
expect 2 "-o a.pkl: is the input a.pkl" "infos -o over its input" -- \
  "$petrsim" import mmdet3d-infos a.pkl -o a.pkl --quiet --no-cache
cmp -s a.pkl a.keep || fail "import -o a.pkl changed a.pkl"
ln -sf a.pkl link.pkl
expect 2 "is the input a.pkl" "-o a link to the input" -- "$petrsim" import mmdet3d-infos a.pkl -o link.pkl --quiet
cp "$config" config.keep
expect 2 "is the input $config" "config -o over the config" -- \
  "$petrsim" import mmdet3d-config "$config" --data-root root --gpus 2 -o "$config" --quiet --no-cache
cmp -s "$config" config.keep || fail "import mmdet3d-config -o CONFIG changed the config"
printf 'Set random seed to 0\n' >train.log
cp train.log log.keep
expect 2 "is the input train.log" "config -o over its --log" -- \
  "$petrsim" import mmdet3d-config "$config" --data-root root --gpus 2 --log train.log -o train.log --quiet --no-cache
cmp -s train.log log.keep || fail "import -o LOG changed the log"
printf 'notes\n' >notes.txt
expect 2 "-o notes.txt: exists and is not a scenario petrsim import wrote" "-o over a file not a scenario" -- \
  "$petrsim" import mmdet3d-infos a.pkl -o notes.txt --quiet --no-cache
[ "$(cat notes.txt)" = notes ] || fail "import -o notes.txt changed it"
for out in S.pb S.pbtxt S.json; do
  expect 0 "" "first import -o $out" -- "$petrsim" import mmdet3d-infos a.pkl -o $out --quiet --no-cache
  expect 0 "" "re-import -o $out (an import's own output)" -- "$petrsim" import mmdet3d-infos a.pkl -o $out --quiet --no-cache
done
: >empty.pbtxt
expect 0 "" "-o an empty file" -- "$petrsim" import mmdet3d-infos a.pkl -o empty.pbtxt --quiet --no-cache

# --- Point 5: counts refused, never truncated.
printf 'gpu_ids = range(0, 10**12)\n' >big.log
expect 2 "big.log:1: gpu_ids = range(0, 10**12): expected gpu_ids = range(0, N) with N the job's GPU count in [1, 65536]" \
  "gpu_ids = range(0, 10**12) (was world size 10)" -- \
  "$petrsim" import mmdet3d-config "$config" --data-root root --log big.log -o big.pbtxt --quiet --no-cache
expect 2 "big.log:1: gpu_ids = range(0, 10**12): expected gpu_ids = range(0, N) with N the job's GPU count in [1, 1048576]" \
  "diagnose of a log with gpu_ids = range(0, 10**12) (was world size 10, exit 0)" -- "$petrsim" diagnose big.log
printf '[E ProcessGroupNCCL.cpp:1] NCCL communicator was aborted on rank 4294967297.\n' >aborted.log
expect 2 "aborted.log:1: rank 4294967297: expected a rank of the job, below 1048576" \
  "a communicator aborted on rank 2^32+1 (was rank 1)" -- "$petrsim" diagnose aborted.log
printf 'global_world_sizes=[10**12]\n' >torchrun.log
expect 2 "torchrun.log:1: global_world_sizes=[10**12]: expected global_world_sizes=[N" \
  "torchrun's global_world_sizes=[10**12] (was world size 10)" -- "$petrsim" diagnose torchrun.log
printf 'gpu_ids = range(0, 4294967298)\n' >wrap.log
expect 2 "gpu_ids = range(0, 4294967298): expected" "gpu_ids = range(0, 2^32+2)" -- \
  "$petrsim" import mmdet3d-config "$config" --data-root root --log wrap.log -o wrap.pbtxt --quiet --no-cache
expect 2 "wrap.log:1: gpu_ids = range(0, 4294967298): expected" "diagnose of gpu_ids = range(0, 2^32+2)" -- \
  "$petrsim" diagnose wrap.log
sed 's/seq_split_num=2,/seq_split_num=4294967298,/' "$config" >configs/streampetr/split.py
expect 2 "seq_split_num: expected an int in [1, 100000] or 'all', found 4294967298" "seq_split_num=2^32+2" -- \
  "$petrsim" import mmdet3d-config configs/streampetr/split.py --data-root root --gpus 2 -o split.pbtxt --quiet
sed 's/seq_split_num=2,/seq_split_num=10**12,/' "$config" >configs/streampetr/split12.py
expect 2 "found 1000000000000" "seq_split_num=10**12" -- \
  "$petrsim" import mmdet3d-config configs/streampetr/split12.py --data-root root --gpus 2 -o split.pbtxt --quiet
printf '[rank0]:[E ProcessGroupNCCL.cpp:828] [Rank 18446744073709551615] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2048, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.\n' >rank.log
expect 2 "rank.log:1: [Rank 18446744073709551615]: expected a rank of the job, below 1048576" "a log's rank 2^64-1" -- \
  "$petrsim" diagnose rank.log --world-size 8
printf '\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03' >header_only.log.gz
expect 2 "header_only.log.gz: a gzip stream of 10 byte(s) that ends before any of its data" "a gzip of its header only" -- \
  "$petrsim" diagnose header_only.log.gz
# A pickle that repeats one memoised info millions of times is refused before its frames are built.
python3 - <<'EOF'
import struct
def s(t):
    b = t.encode()
    return b'\x8c' + bytes([len(b)]) + b
out = bytearray(b'\x80\x04}' + s('infos') + b'](}(' + s('token') + s('a' * 32) + b'u\x94e')
for _ in range(4_001):
    out += b'(' + b'h\x00' * 1000 + b'e'
open('repeated.pkl', 'wb').write(bytes(out + b's.'))
EOF
expect 2 "a list of more than 4000000 records (infos), petrsim's limit for one info file" "4 M repeats of one info" -- \
  "$petrsim" import mmdet3d-infos repeated.pkl -o repeated.pbtxt --quiet --no-cache

# --- Point 5: accepted without a word.
expect 2 "comm.torch_version: must be a supported PyTorch release" "torch_version 1.10abc" -- \
  "$petrsim" check "$tiny" --set comm.torch_version=1.10abc
expect 1 "" "torch_version 1.10.0rc1+cu113 still reads" -- "$petrsim" check "$tiny" --set comm.torch_version=1.10.0rc1+cu113
expect 1 "watchdog_poll_ms 0: exactly at the deadline" "watchdog_poll_ms 0 said" -- \
  "$petrsim" "$tiny" --set comm.watchdog_poll_ms=0 --set comm.backend=nccl
expect 2 "--trace-ring 4294967296: expected at most --trace-records-max" "--trace-ring 2^32" -- \
  "$petrsim" "$tiny" --trace tr --trace-ring 4294967296
expect 2 "--jobs: Value 0 not in range 1 to 4096" "sweep --jobs 0" -- "$petrsim" sweep "$tiny" --jobs 0
expect 2 "--classes '': expected your config's class names" "--classes \"\"" -- \
  "$petrsim" import mmdet3d-infos a.pkl --classes "" -o c.pbtxt --quiet --no-cache
expect 2 "--perfetto-iterations 1-2 and --perfetto-last 5: expected one window, found two" "two perfetto windows" -- \
  "$petrsim" "$tiny" --perfetto p.json --perfetto-iterations 1-2 --perfetto-last 5
expect 2 "dataset.subdatasets[0].explicit.scenes[1].name: must not repeat the name of dataset.subdatasets[0].explicit.scenes[0]" \
  "duplicate scene names" -- "$petrsim" check "$tiny" --set 'dataset.subdatasets[0].explicit.scenes[1].name=a'
expect 2 "faults[0].uneven_batches: has no effect here: the infinite sampler never runs out of batches" \
  "uneven_batches with the infinite sampler in a job sized by iterations (was ignored)" -- \
  "$petrsim" "$tiny" --set faults[0].uneven_batches.rank=1
expect 1 "outcome: hang" "uneven_batches with an epoch sampler still runs (tiny hangs in its trap pool)" -- \
  "$petrsim" "$tiny" --set faults[0].uneven_batches.rank=1 --set sampler.kind=distributed_group
sed 's/^  subdatasets {/  subdatasets { name: "mini" synthetic { scenes: 2 } }\n  subdatasets {/' "$tiny" >dup.pbtxt
expect 2 "dataset.subdatasets[1].name: must not repeat the name of dataset.subdatasets[0]" "duplicate sub-dataset names" -- \
  "$petrsim" check dup.pbtxt

# A world of 2^20 ranks given to a log's diagnosis: bounded by --world-size's range, and the ranks the log never names
# are one row of its table, not a million (96 MB of rows).
expect 1 "" "diagnose --world-size 1048576" -- \
  "$petrsim" diagnose "$repo/tests/data/logs/seed_job_excerpt.log" --world-size 1048576
grep -qF "  4-1048575 - (never printed a timeout)" out.txt || fail "--world-size 1048576: no row for ranks 4-1048575"
[ "$(wc -c <out.txt)" -lt 100000 ] || fail "--world-size 1048576: $(wc -c <out.txt) bytes of report"
expect 2 "--world-size: Value 1048577 not in range" "diagnose --world-size 2^20+1" -- \
  "$petrsim" diagnose "$repo/tests/data/logs/seed_job_excerpt.log" --world-size 1048577

# --- Point 2: sizes from input are bounded before memory is spent; a regression stops at 4 GB of
# address space and 20 s here instead of eating the machine (it was bad_alloc at 5.9 GB after 25 s).
limited() { (ulimit -v 4000000 && exec timeout 20 "$@"); }
# refused TEXT LABEL -- COMMAND...: exit 2, TEXT on stderr, nothing on stdout.
refused() {
  expect 2 "$1" "$2" -- "${@:4}"
  [ ! -s out.txt ] || fail "$2: wrote to stdout: $(head -c 200 out.txt)"
}
seed=$repo/scenarios/streampetr_trainval_hang.pbtxt
terms_set=(--set plan.streampetr.focal_head_loss_terms=4000000000)
terms="plan.streampetr.focal_head_loss_terms: must be <= 1000 (one all-reduce per term in every iteration: the plan would hold about 596.0 GiB for them), got 4000000000"
refused "$terms" "plan, 4e9 loss terms" -- limited "$petrsim" plan "$seed" "${terms_set[@]}"
refused "$terms" "run, 4e9 loss terms" -- limited "$petrsim" "$seed" "${terms_set[@]}" --trace terms_trace
[ ! -e terms_trace ] || fail "a refused run wrote terms_trace"
refused "$terms" "check, 4e9 loss terms" -- limited "$petrsim" check "$seed" "${terms_set[@]}" --no-cache
refused "--iterations 1000000: expected a listing of at most 1000000 collectives, found 51020007 for $tiny (about 7.1 GiB to build and print); use --iterations 19600 or fewer" \
  "plan --iterations 10^6" -- limited "$petrsim" plan "$tiny" --iterations 1000000
expect 0 "" "plan --iterations 19600 (the most that fit) lists" -- limited "$petrsim" plan "$tiny" --iterations 19600
wrap=(--set job.epochs=2 --set job.iterations_per_epoch=18446744073709551615)
wrapped="(after --set): job.iterations_per_epoch: must be in [1, 1000000000], got 18446744073709551615"
refused "$wrapped" "plan, epochs x 2^64-1" -- limited "$petrsim" plan "$tiny" "${wrap[@]}"
refused "$wrapped" "run, epochs x 2^64-1" -- limited "$petrsim" "$tiny" "${wrap[@]}"
refused "$wrapped" "check, epochs x 2^64-1" -- limited "$petrsim" check "$tiny" "${wrap[@]}" --no-cache
refused "job.iterations_per_epoch: times job.epochs (100000) must be at most 1000000000 iterations, got 100000 (10000000000 iterations)" \
  "epochs x iterations_per_epoch beyond 10^9" -- \
  limited "$petrsim" "$tiny" --set job.epochs=100000 --set job.iterations_per_epoch=100000
# The default iterations per epoch (StreamPETR's 28130 // (GPUs x samples)) times the epochs.
two_scenes='dataset { subdatasets { explicit { scenes { gt_counts: [1, 1, 1, 1] } scenes { gt_counts: [1, 1, 1, 1] } } } }'
printf '%s\n' "$two_scenes" 'grouping { seq_split_num: 2 }' 'sampler { kind: infinite_group_each_sample_in_batch }' \
  'job { world_size: 1 samples_per_gpu: 1 workers_per_gpu: 0 epochs: 100000 }' >epochs.pbtxt
length="epochs.pbtxt: job.epochs x iterations per epoch: must be at most 1000000000 iterations, got 100000 x 28130"
refused "$length" "run, epochs x the default iterations per epoch" -- limited "$petrsim" epochs.pbtxt
refused "$length" "check, the same" -- limited "$petrsim" check epochs.pbtxt --no-cache
refused "$length" "sample, the same" -- limited "$petrsim" sample epochs.pbtxt
# A DDP model whose repeats unroll into more state_dict keys than petrsim holds.
printf '%s\n' "$two_scenes" 'job { world_size: 1 samples_per_gpu: 1 workers_per_gpu: 0 iterations: 2 }' \
  'plan { custom {} ddp { tensors { name: "w" shape: [4] repeat: 1000000 state_dict_aliases: 1000 } } }' >keys.pbtxt
refused "keys.pbtxt: plan.ddp.tensors: must stand for at most 1000000 state_dict keys in all (repeat x (1 + state_dict_aliases), summed; about 93.2 GiB unrolled), got 1001000000" \
  "DDP repeat x aliases" -- limited "$petrsim" plan keys.pbtxt
# train validates before it spawns a rank: 1,024 ranks used to start, each to find the sampler impossible.
if [ -x "$(dirname "$petrsim")/petrsim_train" ]; then
  refused "job.world_size * job.samples_per_gpu: InfiniteGroupEachSampleInBatchSampler asserts groups_num >= world_size * samples_per_gpu, got 8 < 1024 * 1" \
    "train --nproc 1024" -- timeout 20 "$petrsim" train "$tiny" --backend gloo --nproc 1024 --set job.world_size=1024 --quiet
  ! grep -q "rank [0-9]" err.txt || fail "train --nproc 1024: a rank started: $(head -c 300 err.txt)"
  refused "$terms" "train, 4e9 loss terms" -- timeout 20 "$petrsim" train "$tiny" --backend gloo --nproc 2 "${terms_set[@]}"
fi

# --- Point 6: what was unclear.
refused "/nonexistent-petrsim-dir: no such file or directory" "diagnose a missing directory" -- \
  "$petrsim" diagnose /nonexistent-petrsim-dir
mkdir -p unrelated && echo '{"image": "x"}' >unrelated/container_info.json
refused "unrelated: expected a directory of one job's recordings (petrsim's rank_<r>.pbtrace, Flight Recorder dumps named by rank such as nccl_trace_rank_<r>, or training logs), found no file named like one; the first file read: unrelated/container_info.json" \
  "diagnose a directory of unrelated JSON" -- "$petrsim" diagnose unrelated
mkdir -p loop && ln -sf b.py loop/a.py && ln -sf a.py loop/b.py && echo "_base_ = ['./a.py']" >loop/cfg.py
refused "cfg.py:1: _base_ './a.py': loop/a.py: cannot be read: Too many levels of symbolic links" "a _base_ symlink loop" -- \
  "$petrsim" import mmdet3d-config loop/cfg.py -o loop.pbtxt --quiet --no-cache
"$petrsim" "$tiny" --trace full_trace --quiet >/dev/null 2>&1
mkdir -p no_header
python3 -c '
data = open("full_trace/rank_0.pbtrace", "rb").read()
size, at, shift = 0, 0, 0
while True:  # the header length, a varint
    byte = data[at]; at += 1; size |= (byte & 0x7F) << shift; shift += 7
    if byte < 0x80: break
open("no_header/rank_0.pbtrace", "wb").write(data[at + size:])'
no_header="no_header/rank_0.pbtrace: not a petrsim trace: expected its header first (a TraceHeader)"
refused "$no_header" "plan of a trace without its header" -- "$petrsim" plan no_header/rank_0.pbtrace
refused "$no_header" "diagnose of the same" -- "$petrsim" diagnose no_header
refused "$no_header" "replay of the same" -- "$petrsim" replay no_header --against sim
refused "'frobnicate' is not a command (nor a scenario file): expected one of help, check" "an unknown command" -- \
  "$petrsim" frobnicate "$tiny"
sed 's/^resample/filters { bev_range_min_m: nan }\nresample/' "$tiny" >nan_range.pbtxt
refused "nan_range.pbtxt: filters.bev_range_min_m: must be finite, got nan" "bev_range_min_m: nan" -- \
  "$petrsim" check nan_range.pbtxt --no-cache

[ "$failures" = 0 ] || exit 1
echo "hostile_input: all cases as expected"
