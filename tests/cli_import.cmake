# `petrsim import` end to end: the fixtures (tests/data/importers/) imported by both routes and
# checked by `petrsim check`; and on bad input exit status 2, nothing on standard output, no
# scenario file (nothing half-written), and an error naming the file, the key path, what was
# expected and what was found. (tests/cli_bad_input.cmake puts the file right after the
# subcommand, which `import mmdet3d-infos FILE` cannot follow.)
# Arguments: -DPETRSIM=... -DDATA=tests/data/importers -DWORK_DIR=...
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(out ${WORK_DIR}/out.pbtxt)

function(expect_success label)
  execute_process(COMMAND ${PETRSIM} ${ARGN} OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr RESULT_VARIABLE code)
  if(NOT code EQUAL 0)
    message(FATAL_ERROR "${label}: exit ${code}, expected 0\n${stdout}\n${stderr}")
  endif()
  set(stdout "${stdout}" PARENT_SCOPE)
endfunction()

function(expect_in label text haystack)
  string(FIND "${haystack}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${label}: expected \"${text}\" in:\n${haystack}")
  endif()
endfunction()

# The info pickles (train + val), then check: 35 frames, the two chunks without GT.
expect_success("import mmdet3d-infos" import mmdet3d-infos ${DATA}/mini_infos_train.pkl ${DATA}/mini_infos_val.pkl -o ${out})
expect_in("import summary" "  total                   35       5      10               9               2        138         60" "${stdout}")
expect_in("import summary" "next: petrsim check ${out}" "${stdout}")
# Without a config, the summary says which filter values it assumed and how to change each.
expect_in("import summary" "filter_empty_gt    true                    assumed             --no-filter-empty-gt        --set filters.filter_empty_gt=false" "${stdout}")
expect_in("import summary" "use_valid_flag     true                    assumed             --no-valid-flag" "${stdout}")
expect_in("import summary" "seq_split_num      2                       assumed             --seq-split-num N" "${stdout}")
execute_process(COMMAND ${PETRSIM} check ${out} OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr RESULT_VARIABLE code)
if(NOT code EQUAL 1)
  message(FATAL_ERROR "check of the imported scenario: exit ${code}, expected 1 (a livelock)\n${stdout}\n${stderr}")
endif()
expect_in("check" "frames with zero GT after the filters: 9 of 35" "${stdout}")
expect_in("check" "10 chunks (2 all without GT" "${stdout}")
expect_in("check" "LIVELOCK: 2 pool(s)" "${stdout}")
# With the user's fix the check proves termination (the sampler still needs more groups than
# this fixture has: 16 slots).
execute_process(COMMAND ${PETRSIM} check ${out} --set resample.policy=global --set job.world_size=2
                        --set job.samples_per_gpu=1
                OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr RESULT_VARIABLE code)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "check --set resample.policy=global: exit ${code}, expected 0\n${stdout}\n${stderr}")
endif()

# The nuScenes tables of the same data: the same counts, a binary scenario this time.
expect_success("import nuscenes" import nuscenes --dataroot ${DATA}/nuscenes --version v1.0-mini
               --split mini_train,mini_val -o ${WORK_DIR}/json.pb)
expect_in("import nuscenes summary" "  total             35       5      10               9               2        138         60" "${stdout}")
execute_process(COMMAND ${PETRSIM} check ${WORK_DIR}/json.pb OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr RESULT_VARIABLE code)
expect_in("check of json.pb" "frames with zero GT after the filters: 9 of 35" "${stdout}")

# The filter options are recorded in the scenario.
expect_success("import with options" import mmdet3d-infos ${DATA}/mini_infos_val.pkl -o ${WORK_DIR}/options.pbtxt
               --classes car,pedestrian --range -30,-30,-5,30,30,3 --no-valid-flag --name val)
expect_in("options summary" "use_valid_flag     false                   --no-valid-flag" "${stdout}")
expect_in("options summary" "point_cloud_range  x, y in (-30, 30)       --range" "${stdout}")
file(READ ${WORK_DIR}/options.pbtxt scenario)
expect_in("options" "use_valid_flag: false" "${scenario}")
expect_in("options" "bev_range_min_m: -30" "${scenario}")
expect_in("options" "classes: \"pedestrian\"" "${scenario}")
expect_in("options" "name: \"val\"" "${scenario}")

# Bad input: "args|expected message" (or "args|re:regular expression") with the output at ${out},
# which must not exist after.
set(bad ${DATA}/bad)
set(cases
  "mmdet3d-infos ${bad}/truncated.pkl|re:truncated\\.pkl: byte [0-9]+: truncated: the opcode needs"
  "mmdet3d-infos ${bad}/empty.pkl|empty.pkl: empty file (not a pickle)"
  "mmdet3d-infos ${bad}/not_a_pickle.pkl|not_a_pickle.pkl: byte 0: unknown pickle opcode 0x7b"
  "mmdet3d-infos ${bad}/missing.pkl|missing.pkl: cannot open info file"
  "mmdet3d-infos ${bad}/timestamp_str.pkl|timestamp_str.pkl: infos[1].timestamp: expected an int (microseconds), found str '1532403"
  "mmdet3d-infos ${bad}/no_sweeps.pkl|no_sweeps.pkl: infos[2]: missing key 'sweeps'"
  "mmdet3d-infos ${bad}/boxes_3_columns.pkl|boxes_3_columns.pkl: infos[0].gt_boxes: expected a float array of shape (N, 7)"
  "mmdet3d-infos ${bad}/names_short.pkl|names_short.pkl: infos[0].gt_names: expected a str array of shape (6,)"
  "mmdet3d-infos ${bad}/lidar_pts_float.pkl|lidar_pts_float.pkl: infos[0].num_lidar_pts: expected an int array of shape (6,) (one per gt_boxes row), found float64 array of shape (6,)"
  "mmdet3d-infos ${bad}/no_gt.pkl|no_gt.pkl: infos[0]: missing key 'gt_boxes'"
  "mmdet3d-infos ${bad}/infos_not_list.pkl|infos_not_list.pkl: infos: expected a list, found a dict"
  "mmdet3d-infos ${bad}/data_list.pkl|data_list.pkl: top level: this is an mmdet3d 1.x info file"
  "mmdet3d-infos ${bad}/calls_system.pkl|calls_system.pkl: byte 21: refused global posix.system"
  "mmdet3d-infos ${bad}/calls_eval.pkl|calls_eval.pkl: byte 29: refused global builtins.eval"
  "mmdet3d-infos ${bad}/array_shape_mismatch.pkl|array_shape_mismatch.pkl: byte 214: numpy array of dtype <f8 and shape (2, 7): 14 elements x 8 bytes, but the data holds 8 bytes"
  "mmdet3d-infos ${DATA}/mini_infos_val.pkl --range 1,2,3|--range 1,2,3: expected 6 numbers"
  "mmdet3d-infos ${DATA}/mini_infos_val.pkl --classes car,car|--classes: 'car' appears twice"
  "mmdet3d-infos ${DATA}/mini_infos_val.pkl ${DATA}/mini_infos_val.pkl|two sub-datasets are named 'mini_infos_val'"
  "mmdet3d-infos ${DATA}/mini_infos_val.pkl --name a,b|--name a,b: 2 name(s) for 1 file(s)"
  "nuscenes --dataroot ${DATA}/nuscenes --version v1.0-mini --split test|--split test: not an official split of v1.0-mini"
  "nuscenes --dataroot ${DATA}/nuscenes --version v1.0-trainval --split train|v1.0-trainval/category.json: cannot open nuScenes table"
  "nuscenes --dataroot ${DATA}/bad_nuscenes_missing_table --version v1.0-mini --split mini_val|v1.0-mini/sample.json: cannot open nuScenes table"
  "nuscenes --dataroot ${DATA}/bad_nuscenes_broken_json --version v1.0-mini --split mini_val|v1.0-mini/sample.json: invalid JSON at byte"
  "nuscenes --dataroot ${DATA}/bad_nuscenes_translation --version v1.0-mini --split mini_train|v1.0-mini/sample_annotation.json: record 3 (token")
foreach(case IN LISTS cases)
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 args)
  list(GET parts 1 expected)
  separate_arguments(args UNIX_COMMAND "${args}")
  file(REMOVE ${out})
  execute_process(COMMAND ${PETRSIM} import ${args} -o ${out}
                  OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr RESULT_VARIABLE code)
  if(NOT code EQUAL 2)
    message(FATAL_ERROR "import ${args}: exit ${code}, expected 2\n${stdout}\n${stderr}")
  endif()
  if(NOT stdout STREQUAL "")
    message(FATAL_ERROR "import ${args}: wrote to stdout on bad input:\n${stdout}")
  endif()
  if(EXISTS ${out} OR EXISTS ${out}.tmp)
    message(FATAL_ERROR "import ${args}: left a scenario file behind on bad input")
  endif()
  if(expected MATCHES "^re:")
    string(SUBSTRING "${expected}" 3 -1 pattern)
    if(NOT stderr MATCHES "${pattern}")
      message(FATAL_ERROR "import ${args}: expected /${pattern}/ in:\n${stderr}")
    endif()
  else()
    expect_in("import ${args}" "${expected}" "${stderr}")
  endif()
endforeach()

# An output that cannot be written: exit 2, nothing left.
execute_process(COMMAND ${PETRSIM} import mmdet3d-infos ${DATA}/mini_infos_val.pkl -o ${WORK_DIR}/no-such-dir/out.pbtxt
                OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr RESULT_VARIABLE code)
if(NOT code EQUAL 2 OR NOT stdout STREQUAL "")
  message(FATAL_ERROR "import to a missing directory: exit ${code}\n${stdout}\n${stderr}")
endif()
expect_in("missing directory" "no-such-dir/out.pbtxt.tmp: cannot open for writing" "${stderr}")
