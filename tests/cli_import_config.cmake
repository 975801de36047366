# `petrsim import mmdet3d-config` end to end (issue 18): a config in the shape of StreamPETR's (tests/data/configs/
# streampetr) over the importers' mini info files laid out as its ann_file names them under --data-root: the older
# train+val form imports with each value's file:line in the scenario and livelocks in `check`; the current config
# is proven to terminate; bad input exits 2 with nothing written.
# Arguments: -DPETRSIM=... -DCONFIGS=tests/data/configs/streampetr -DDATA=tests/data/importers -DWORK_DIR=...
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/root)
configure_file(${DATA}/mini_infos_train.pkl ${WORK_DIR}/root/nuscenes2d_temporal_infos_train.pkl COPYONLY)
configure_file(${DATA}/mini_infos_val.pkl ${WORK_DIR}/root/nuscenes2d_temporal_infos_val.pkl COPYONLY)

function(run expected_code label)
  execute_process(COMMAND ${PETRSIM} ${ARGN} OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr RESULT_VARIABLE code)
  if(NOT code EQUAL expected_code)
    message(FATAL_ERROR "${label}: exit ${code}, expected ${expected_code}\n${stdout}\n${stderr}")
  endif()
  set(stdout "${stdout}" PARENT_SCOPE)
  set(stderr "${stderr}" PARENT_SCOPE)
endfunction()
function(expect_in label text haystack)
  string(FIND "${haystack}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${label}: expected \"${text}\" in:\n${haystack}")
  endif()
endfunction()

set(old ${WORK_DIR}/trainval.pbtxt)
run(0 "import the train+val config" import mmdet3d-config ${CONFIGS}/stream_petr_r50_704_trainval_24e.py
    --data-root ${WORK_DIR}/root --gpus 2 -o ${old})
expect_in("summary" "filters.filter_empty_gt = true  # default (CustomNuScenesDataset: filter_empty_gt=True) [mmdet3d@47285b3f mmdet3d/datasets/custom_3d.py:70,216-234]" "${stdout}")
# The filter table names where each value came from (no "assumed": the config says them all).
expect_in("summary table" "filter_empty_gt    true                    CustomNuScenesDataset default           (edit the config)" "${stdout}")
expect_in("summary table" "use_valid_flag     true                    stream_petr_r50_704_trainval_24e.py:40" "${stdout}")
# (The release is the one value a config never says: its note is the one "assumed" the summary holds.)
expect_in("release assumed in the summary" "note: comm.torch_version: PyTorch 1.9 assumed (the reference job's); pass --torch-version" "${stdout}")
string(REPLACE "PyTorch 1.9 assumed" "" without_release "${stdout}")
string(FIND "${without_release}" "assumed" assumed_at)
if(NOT assumed_at EQUAL -1)
  message(FATAL_ERROR "the config import's summary calls a value assumed:\n${stdout}")
endif()
file(READ ${old} scenario)
expect_in("provenance in the file" "#   plan.streampetr.decoder_layers = 3  # " "${scenario}")
expect_in("provenance in the file" "stream_petr_r50_704_trainval_24e.py:21 (decoder.num_layers)" "${scenario}")
expect_in("the job in the file" "world_size: 2" "${scenario}")
run(1 "check of the train+val config" check ${old})
expect_in("check" "verdict: the job hangs" "${stdout}")
# Where nothing names the release, the import says what it assumed.
expect_in("release assumed in the file" "PyTorch 1.9 assumed (the reference job's); pass --torch-version" "${scenario}")
# Each proven fix as the change the user makes, against the user's config (issue 28, point 3).
expect_in("config fix" "config: add filter_empty_gt=False to data.train (type='CustomNuScenesDataset', ${CONFIGS}/stream_petr_r50_704_trainval_24e.py:27)" "${stdout}")
expect_in("code fix" "code: in CustomNuScenesDataset._rand_another (StreamPETR@95f64702 projects/mmdet3d_plugin/datasets/nuscenes_dataset.py:244-257" "${stdout}")
expect_in("data fix" "data: drop the frames above from the info files (${WORK_DIR}/root/nuscenes2d_temporal_infos_train.pkl, ${WORK_DIR}/root/nuscenes2d_temporal_infos_val.pkl)" "${stdout}")
# The data fix as a script: it writes fixed copies of the info files, which import and check as proven.
run(1 "check --write-drops" check ${old} --write-drops ${WORK_DIR}/drops.py)
execute_process(COMMAND ${PYTHON} ${WORK_DIR}/drops.py OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr RESULT_VARIABLE code)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "drops.py: exit ${code}\n${stdout}\n${stderr}")
endif()
expect_in("drops.py" "nuscenes2d_temporal_infos_val.pkl: 3 infos dropped, 11 kept" "${stdout}")
run(0 "import the fixed infos" import mmdet3d-config ${CONFIGS}/stream_petr_r50_704_trainval_24e.py --gpus 2
    --infos ${WORK_DIR}/root/nuscenes2d_temporal_infos_train.petrsim_fixed.pkl
    ${WORK_DIR}/root/nuscenes2d_temporal_infos_val.petrsim_fixed.pkl -o ${WORK_DIR}/fixed.pbtxt)
run(0 "check of the fixed infos" check ${WORK_DIR}/fixed.pbtxt)
expect_in("check of the fixed infos" "verdict: proven" "${stdout}")
run(2 "--write-drops without drops" check ${WORK_DIR}/fixed.pbtxt --write-drops ${WORK_DIR}/none.py)
expect_in("--write-drops without drops" "the check proves no frames to drop" "${stderr}")
if(EXISTS ${WORK_DIR}/none.py OR EXISTS ${WORK_DIR}/none.py.tmp)
  message(FATAL_ERROR "--write-drops without drops wrote a file")
endif()

# The release and the world from the job's training log (its environment block and gpu_ids), the config's named
# beside them; --torch-version over the log's.
file(WRITE ${WORK_DIR}/train.log "2024-03-01 10:00:00,000 - mmdet - INFO - Environment info:\n"
  "------------------------------------------------------------\nsys.platform: linux\nPyTorch: 1.13.1+cu117\n"
  "------------------------------------------------------------\n"
  "2024-03-01 10:00:01,000 - mmdet - INFO - Set random seed to 7, deterministic: False\ngpu_ids = range(0, 4)\n")
run(0 "import with the log" import mmdet3d-config ${CONFIGS}/stream_petr_r50_704_trainval_24e.py
    --data-root ${WORK_DIR}/root --log ${WORK_DIR}/train.log -o ${WORK_DIR}/logged.pbtxt)
expect_in("release from the log" "comm.torch_version = 1.13  # ${WORK_DIR}/train.log:4 (PyTorch: 1.13.1+cu117)" "${stdout}")
expect_in("seed from the log" "job.seed = 7  # ${WORK_DIR}/train.log:6 (Set random seed to)" "${stdout}")
expect_in("world from the log" "world size: the config says 8, the log 4 (gpu_ids = range(0, 4) at ${WORK_DIR}/train.log:7): the log's is used" "${stdout}")
file(READ ${WORK_DIR}/logged.pbtxt logged)
expect_in("the release in the file" "torch_version: \"1.13\"" "${logged}")
expect_in("the world in the file" "world_size: 4" "${logged}")
run(0 "--torch-version over the log" import mmdet3d-config ${CONFIGS}/stream_petr_r50_704_trainval_24e.py
    --data-root ${WORK_DIR}/root --log ${WORK_DIR}/train.log --torch-version 2.1 -o ${WORK_DIR}/given.pbtxt)
expect_in("--torch-version over the log" "release: --torch-version 2.1, the log PyTorch 1.13.1+cu117 (${WORK_DIR}/train.log:4): --torch-version is used" "${stdout}")
run(2 "an unmodelled release" import mmdet3d-config ${CONFIGS}/stream_petr_r50_704_trainval_24e.py
    --data-root ${WORK_DIR}/root --torch-version 1.5 -o ${WORK_DIR}/old.pbtxt)
expect_in("an unmodelled release" "--torch-version: PyTorch 1.5 is not a release petrsim models" "${stderr}")

set(current ${WORK_DIR}/current.pbtxt)
run(0 "import the current config" import mmdet3d-config ${CONFIGS}/stream_petr_r50_704_bs2_seq_24e.py
    --data-root ${WORK_DIR}/root --gpus 2 -o ${current})
run(0 "check of the current config" check ${current})
expect_in("check" "verdict: proven" "${stdout}")

# Bad input: exit 2, nothing on stdout, no file.
set(bad ${WORK_DIR}/bad.pbtxt)
run(2 "missing infos" import mmdet3d-config ${CONFIGS}/stream_petr_r50_704_trainval_24e.py --gpus 2 -o ${bad})
expect_in("missing infos" "nuscenes2d_temporal_infos_train.pkl: no such info file (from ann_file './data/nuscenes/nuscenes2d_temporal_infos_train.pkl' (" "${stderr}")
expect_in("missing infos" "pass --data-root DIR, the directory the config's data_root stands for on this machine, or --infos FILE ... with the 2 info file(s) in ann_file order" "${stderr}")
# A value the scenario needs that depends on what petrsim never evaluates: the field, the file:line, the construct.
file(WRITE ${WORK_DIR}/import.py "import os\nnum_gpus = int(os.environ['WORLD_SIZE'])\ndata = dict(train=dict(type='NuScenesDataset', ann_file='a.pkl'))\n")
run(2 "a config that imports" import mmdet3d-config ${WORK_DIR}/import.py -o ${bad})
expect_in("a config that imports" "num_gpus: the scenario needs this value, and it depends on" "${stderr}")
expect_in("a config that imports" "import.py:1: a name from an import ('os')" "${stderr}")
if(EXISTS ${bad} OR NOT stdout STREQUAL "")
  message(FATAL_ERROR "bad input left ${bad} or printed:\n${stdout}")
endif()
