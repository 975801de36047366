# The petrsim executable on bad input: exit status 2, nothing on standard output (nothing
# half-written), and an error on standard error that names the file and the field or line.
set(dir ${WORK_DIR}/cli_bad_input)
file(MAKE_DIRECTORY ${dir})
file(WRITE ${dir}/rule.pbtxt "dataset { subdatasets { explicit { scenes { gt_counts: [1, 1] } } } }\njob { world_size: 0 }\n")
file(WRITE ${dir}/syntax.pbtxt "job {\n  world_size: 2\n")
# Files that are not what they seem: a directory, a FIFO, a symlink loop (each read would hang,
# read without end or fail obscurely), named as such.
file(MAKE_DIRECTORY ${dir}/a_directory.pbtxt)
file(REMOVE ${dir}/fifo.pbtxt ${dir}/loop_a.pbtxt ${dir}/loop_b.pbtxt ${dir}/loop_a.pbtrace ${dir}/loop_b.pbtrace)
execute_process(COMMAND mkfifo ${dir}/fifo.pbtxt)
file(CREATE_LINK loop_b.pbtxt ${dir}/loop_a.pbtxt SYMBOLIC)
file(CREATE_LINK loop_a.pbtxt ${dir}/loop_b.pbtxt SYMBOLIC)
file(CREATE_LINK loop_b.pbtrace ${dir}/loop_a.pbtrace SYMBOLIC)
file(CREATE_LINK loop_a.pbtrace ${dir}/loop_b.pbtrace SYMBOLIC)
file(WRITE ${dir}/two_seeds.log "Set random seed to 0, deterministic: False\nSet random seed to 1, deterministic: False\n")
execute_process(COMMAND printf "\\177ELF\\002\\001\\001\\000\\000\\000\\003\\000>\\000" OUTPUT_FILE ${dir}/binary.log)
file(WRITE ${dir}/README.md "# A project\n\nThe job printed `Watchdog caught collective operation timeout`\n")
file(WRITE ${dir}/good.pbtxt "dataset { subdatasets { explicit { scenes { gt_counts: [1, 1, 1, 1] } scenes { gt_counts: [1, 1, 1, 1] } } } }\ngrouping { seq_split_num: 2 }\njob { world_size: 2 samples_per_gpu: 1 workers_per_gpu: 0 iterations: 2 }\n")
set(cases
  "check|rule.pbtxt|rule.pbtxt: job.world_size: must be in [1, 65536], got 0"
  "sample|rule.pbtxt|rule.pbtxt: job.world_size: must be in [1, 65536], got 0"
  "check|syntax.pbtxt|syntax.pbtxt:3:1: Expected identifier, got: end of file"
  "check --json|missing.pbtxt|missing.pbtxt: cannot open scenario file"
  "check|a_directory.pbtxt|a_directory.pbtxt: expected a scenario file (a regular file), found a directory"
  "--no-wall-time|fifo.pbtxt|fifo.pbtxt: expected a scenario file (a regular file), found a FIFO"
  "sample|loop_a.pbtxt|loop_a.pbtxt: cannot open scenario file: Too many levels of symbolic links"
  "merge|a_directory.pbtxt|a_directory.pbtxt: expected a shard file (a regular file), found a directory"
  "--no-wall-time|rule.pbtxt|rule.pbtxt: job.world_size: must be in [1, 65536], got 0"
  "--no-wall-time --set job.world_size=abc|good.pbtxt|--set job.world_size=abc: job.world_size expects an unsigned 32-bit integer, got 'abc'"
  "--no-wall-time --set job.world_size=0|good.pbtxt|good.pbtxt (after --set): job.world_size: must be in [1, 65536], got 0"
  "--no-wall-time --perfetto /nonexistent-dir/run.json|good.pbtxt|/nonexistent-dir/run.json.tmp: cannot open for writing"
  "check --set resample.polcy=global|good.pbtxt|no field 'polcy' in petrsim.Resample"
  "sweep --vary job.world_size|good.pbtxt|--vary job.world_size: expected field.path=value1,value2,..., got no '='"
  "sweep --shard 0/2|good.pbtxt|--shard: expected K/N with 1 <= K <= N"
  "sweep --vary job.world_size=2,0|good.pbtxt|with --vary job.world_size=0: job.world_size: must be in [1, 65536], got 0"
  "merge|missing.json|missing.json: cannot open shard file"
  "diagnose|missing-dir|missing-dir: no such file or directory"
  "diagnose|syntax.pbtxt|syntax.pbtxt: byte 0: neither a petrsim trace"
  "diagnose --set job.world_size=2|good.pbtxt|diagnose: --set and --torch-version need --scenario"
  "diagnose|two_seeds.log|two_seeds.log:2: `Set random seed to 1`, but"
  "diagnose|binary.log|binary.log: byte 7: expected a text training log, found binary data"
  "diagnose|README.md|README.md: not a training log, a petrsim trace or a Flight Recorder dump: none of its 3 line(s) is one petrsim reads"
  "diagnose|README.md|it starts with \"# A project\""
  "check --torch-version 1.5|good.pbtxt|good.pbtxt (after --set): comm.torch_version: must be a supported PyTorch release"
  "--no-wall-time --trace-ring 10|good.pbtxt|--trace-ring and --trace-records-max need --trace DIR"
  "--no-wall-time --trace-ring -1|good.pbtxt|--trace-ring: Value -1 not in range 0 to 4294967296"
  "--no-wall-time --trace-records-max 0|good.pbtxt|--trace-records-max: Value 0 not in range 1"
  "sample --iterations -1|good.pbtxt|--iterations: Value -1 not in range 0 to 1000000000"
  "sweep --seed-base -1|good.pbtxt|--seed-base: Value -1 not in range 0 to 4611686018427387904"
  "--no-wall-time --memory-max 16G --set job.world_size=65536 --set job.workers_per_gpu=256|good.pbtxt|good.pbtxt: simulating it needs about 86.5 GiB of memory (8 frames x 64 B, 65536 ranks x 1.4 MiB"
  "check --memory-max 1K|good.pbtxt|good.pbtxt: the pre-flight check needs about 32.0 MiB of memory (8 frames x 240 B), more than --memory-max 1.0 KiB"
  "--no-wall-time --memory-max 5x|good.pbtxt|--memory-max 5x: expected a positive size in bytes"
  "plan --iterations -1|good.pbtxt|--iterations: Value -1 not in range 0 to 1000000"
  "plan|rule.pbtxt|rule.pbtxt: job.world_size: must be in [1, 65536], got 0")
foreach(case IN LISTS cases)
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 command)
  list(GET parts 1 name)
  list(GET parts 2 expected)
  separate_arguments(command UNIX_COMMAND "${command}")
  list(GET command 0 subcommand)
  list(REMOVE_AT command 0)
  execute_process(COMMAND ${PETRSIM} ${subcommand} ${dir}/${name} ${command}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code TIMEOUT 60)
  if(NOT code EQUAL 2)
    message(FATAL_ERROR "${subcommand} ${name}: exit ${code}, expected 2\n${err}")
  endif()
  if(NOT out STREQUAL "")
    message(FATAL_ERROR "${subcommand} ${name}: wrote to stdout on bad input:\n${out}")
  endif()
  string(FIND "${err}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${subcommand} ${name}: expected \"${expected}\" in stderr:\n${err}")
  endif()
endforeach()

# /dev/zero as a scenario: refused as a device, not read until memory runs out.
execute_process(COMMAND ${PETRSIM} check /dev/zero OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code TIMEOUT 60)
string(FIND "${err}" "/dev/zero: expected a scenario file (a regular file), found a character device" at)
if(NOT code EQUAL 2 OR NOT out STREQUAL "" OR at EQUAL -1)
  message(FATAL_ERROR "check /dev/zero: exit ${code}, expected 2\n${err}")
endif()

# Recordings that are not what they seem: a FIFO named like a rank's trace (it used to hang
# export and replay, and diagnose skipped it and called the job healthy), a symlink loop given as
# the path (diagnose aborted), a link loop inside a trace directory.
set(fifo_dir ${dir}/fifo_traces)
file(REMOVE_RECURSE ${fifo_dir})
file(MAKE_DIRECTORY ${fifo_dir})
execute_process(COMMAND mkfifo ${fifo_dir}/rank_0.pbtrace)
set(loop_dir ${dir}/loop_traces)
file(REMOVE_RECURSE ${loop_dir})
file(MAKE_DIRECTORY ${loop_dir})
file(CREATE_LINK rank_1.pbtrace ${loop_dir}/rank_0.pbtrace SYMBOLIC)
file(CREATE_LINK rank_0.pbtrace ${loop_dir}/rank_1.pbtrace SYMBOLIC)
foreach(case
    "diagnose;${fifo_dir};rank_0.pbtrace: expected a trace or dump file (a regular file), found a FIFO"
    "export;${fifo_dir};rank_0.pbtrace: expected a petrsim trace file (a regular file), found a FIFO"
    "replay;${fifo_dir};rank_0.pbtrace: expected a petrsim trace file (a regular file), found a FIFO"
    "diagnose;${dir}/loop_a.pbtrace;Too many levels of symbolic links"
    "diagnose;${loop_dir};cannot read it: Too many levels of symbolic links")
  string(REPLACE ";" "|" case "${case}")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 subcommand)
  list(GET parts 1 target)
  list(GET parts 2 expected)
  set(extra)
  if(subcommand STREQUAL "export")
    set(extra --perfetto ${dir}/fifo_export.json)
  endif()
  execute_process(COMMAND ${PETRSIM} ${subcommand} ${target} ${extra} OUTPUT_VARIABLE out ERROR_VARIABLE err
                  RESULT_VARIABLE code TIMEOUT 60)
  string(FIND "${err}" "${expected}" at)
  if(NOT code EQUAL 2 OR NOT out STREQUAL "" OR at EQUAL -1)
    message(FATAL_ERROR "${subcommand} ${target}: exit ${code}, expected 2 with '${expected}'\n${out}\n${err}")
  endif()
endforeach()

# A training log with no watchdog line: "no timeout found", exit 0.
file(WRITE ${dir}/fine.log "2022-11-08 10:02:11,532 - mmdet - INFO - Iter [50/42192]\tlr: 2.000e-04, time: 0.561\n")
execute_process(COMMAND ${PETRSIM} diagnose ${dir}/fine.log OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code)
string(FIND "${out}" "no timeout found" at)
if(NOT code EQUAL 0 OR at EQUAL -1)
  message(FATAL_ERROR "diagnose fine.log: exit ${code}, expected 0 with 'no timeout found'\n${out}\n${err}")
endif()

# `petrsim --version` and `petrsim help [COMMAND]`: exit 0 with the text on stdout; an unknown
# command is bad input (exit 2) naming it.
execute_process(COMMAND ${PETRSIM} --version OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code)
if(NOT code EQUAL 0 OR NOT out MATCHES "^petrsim [0-9]+\\.[0-9]+\\.[0-9]+ \\(models PyTorch 1\\.9, ")
  message(FATAL_ERROR "--version: exit ${code}\n${out}\n${err}")
endif()
execute_process(COMMAND ${PETRSIM} help plan OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code)
string(FIND "${out}" "--iterations" at)
if(NOT code EQUAL 0 OR at EQUAL -1)
  message(FATAL_ERROR "help plan: exit ${code}\n${out}\n${err}")
endif()
execute_process(COMMAND ${PETRSIM} help OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code)
string(FIND "${out}" "diagnose" at)
if(NOT code EQUAL 0 OR at EQUAL -1)
  message(FATAL_ERROR "help: exit ${code}\n${out}\n${err}")
endif()
execute_process(COMMAND ${PETRSIM} help nosuch OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code)
string(FIND "${err}" "help: no command named 'nosuch'" at)
if(NOT code EQUAL 2 OR at EQUAL -1 OR NOT out STREQUAL "")
  message(FATAL_ERROR "help nosuch: exit ${code}\n${out}\n${err}")
endif()
