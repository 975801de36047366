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
string(FIND "${stdout}" "assumed" assumed_at)
if(NOT assumed_at EQUAL -1)
  message(FATAL_ERROR "the config import's summary calls a value assumed:\n${stdout}")
endif()
file(READ ${old} scenario)
expect_in("provenance in the file" "#   plan.streampetr.decoder_layers = 3  # " "${scenario}")
expect_in("provenance in the file" "stream_petr_r50_704_trainval_24e.py:21 (decoder.num_layers)" "${scenario}")
expect_in("the job in the file" "world_size: 2" "${scenario}")
run(1 "check of the train+val config" check ${old})
expect_in("check" "verdict: the job hangs" "${stdout}")

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
