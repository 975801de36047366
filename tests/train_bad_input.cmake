# petrsim_train on bad command lines and launcher environments: exit status 2 at once, nothing
# on standard output, and an error naming the option or variable, its range and what was found
# (numbers are parsed whole and within their range: no "5x" read as 5, no -1 wrapped around).
set(cases
  "--nproc 2x|--nproc: Value 2x not in range 1 to 1024"
  "--nproc -1|--nproc: Value -1 not in range 1 to 1024"
  "--nproc 99999999999|--nproc: Value 99999999999 not in range 1 to 1024"
  "--iterations -1|--iterations: Value -1 not in range 1 to 1000000000000"
  "--timeout-ms 0|--timeout-ms: Value 0 not in range 1 to 604800000"
  "--trace-ring 5|--trace-ring requires --trace"
  "--trace-ring -1 --trace ${WORK_DIR}/train_bad_input_trace|--trace-ring: Value -1 not in range"
  "--replay-samples-only|--replay-samples-only requires --replay"
  "--plan-sizes big|--plan-sizes: big not in {scenario,model}"
  "--bogus|The following argument was not expected: --bogus")
foreach(case IN LISTS cases)
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 args)
  list(GET parts 1 expected)
  separate_arguments(args UNIX_COMMAND "${args}")
  execute_process(COMMAND ${TRAIN} ${SCENARIO} ${args} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code
                  TIMEOUT 30)
  string(FIND "${err}" "${expected}" at)
  if(NOT code EQUAL 2 OR NOT out STREQUAL "" OR at EQUAL -1)
    message(FATAL_ERROR "petrsim_train ${args}: exit ${code}, expected 2 with '${expected}'\nstdout: ${out}\nstderr: ${err}")
  endif()
endforeach()

# Launcher mode (no --nproc): RANK must be below WORLD_SIZE, MASTER_PORT a port; refused before
# any rendezvous (a rank 5 of 2 used to wait for peers that never come).
function(expect_env_refused env expected)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ${env} ${TRAIN} ${SCENARIO} --backend gloo
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code TIMEOUT 30)
  string(FIND "${err}" "${expected}" at)
  if(NOT code EQUAL 2 OR NOT out STREQUAL "" OR at EQUAL -1)
    message(FATAL_ERROR "${env} petrsim_train: exit ${code}, expected 2 with '${expected}'\nstdout: ${out}\nstderr: ${err}")
  endif()
endfunction()
expect_env_refused("RANK=5;WORLD_SIZE=2;MASTER_PORT=29500"
                   "the environment variable RANK=5: expected a whole number in [0, 1]")
expect_env_refused("RANK=0;WORLD_SIZE=2;MASTER_PORT=70000"
                   "the environment variable MASTER_PORT=70000: expected a whole number in [1, 65535]")
expect_env_refused("RANK=0x;WORLD_SIZE=2;MASTER_PORT=29500"
                   "the environment variable RANK=0x: expected a whole number in [0, 1]")
expect_env_refused("RANK=0;WORLD_SIZE=-2;MASTER_PORT=29500"
                   "the environment variable WORLD_SIZE=-2: expected a whole number in [1, 1024]")
# Slurm's variables in an srun step (base/launch_env.h): the same checks, and the node list a
# hostlist expression; in the batch script itself (no SLURM_STEP_ID) they are not a launcher.
set(step "SLURM_STEP_ID=0;SLURM_JOB_ID=7;SLURM_NTASKS=2")
expect_env_refused("${step};SLURM_PROCID=2;SLURM_STEP_NODELIST=n1"
                   "the environment variable SLURM_PROCID=2: expected a whole number in [0, 1]")
expect_env_refused("${step};SLURM_PROCID=0;SLURM_STEP_NODELIST=node[01-"
                   "SLURM_STEP_NODELIST=node[01-: at column 9: expected a number in the bracket, got the end")
expect_env_refused("SLURM_JOB_ID=7;SLURM_NTASKS=2;SLURM_PROCID=0"
                   "this is a Slurm batch script, not a job step")

# A backend this build cannot run is an error, never a fallback: the tiny scenario asks for NCCL
# (comm.backend's default), which this build lacks (or, built with NCCL, a machine without a GPU).
execute_process(COMMAND ${TRAIN} ${SCENARIO} --nproc 2 OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code
                TIMEOUT 30)
string(FIND "${err}" "comm.backend is nccl but this" at)
string(FIND "${err}" "run with --backend gloo" hint)
if(NOT code EQUAL 2 OR NOT out STREQUAL "" OR at EQUAL -1 OR hint EQUAL -1)
  message(FATAL_ERROR "petrsim_train on an nccl scenario without NCCL: exit ${code}, expected 2\nstdout: ${out}\nstderr: ${err}")
endif()
execute_process(COMMAND ${TRAIN} ${SCENARIO} --backend mpi OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code
                TIMEOUT 30)
string(FIND "${err}" "--backend: mpi not in {gloo,nccl}" at)
if(NOT code EQUAL 2 OR at EQUAL -1)
  message(FATAL_ERROR "petrsim_train --backend mpi: exit ${code}, expected 2\nstderr: ${err}")
endif()

# With the scenario's plan sizes (the default) the real model must fit the plan's DDP buckets: a
# plan.ddp of one 1000-element tensor is refused by every rank (exit 2), saying so and naming
# --plan-sizes model.
execute_process(COMMAND ${TRAIN} ${SCENARIO} --nproc 2 --backend gloo --set "plan.ddp.tensors[0].shape=1000"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code TIMEOUT 60)
string(FIND "${err}" "the plan's DDP gradient buckets of iteration 0 hold 1000 elements, fewer than the" at)
string(FIND "${err}" "or run with --plan-sizes model" hint)
if(NOT code EQUAL 2 OR NOT out STREQUAL "" OR at EQUAL -1 OR hint EQUAL -1)
  message(FATAL_ERROR "petrsim_train with a plan smaller than the model: exit ${code}, expected 2\nstdout: ${out}\nstderr: ${err}")
endif()
