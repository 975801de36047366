# petrsim_train --nproc 2 on the tiny scenario: with `global` both ranks finish with equal
# parameter hashes (exit 0); with the default in_group and its all-empty chunk, the sampler
# watchdog stops rank 1 (worker 1, batch 5: what `petrsim check` predicts) at once, the
# launcher stops the other rank, and the exit status is 1; its traces go to `petrsim diagnose`.
execute_process(COMMAND ${TRAIN} ${SCENARIO} --nproc 2 --iterations 6 --set resample.policy=global
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code)
if(NOT code EQUAL 0)
  message(FATAL_ERROR "global: exit ${code}\n${out}\n${err}")
endif()
string(REGEX MATCHALL "parameters hash [0-9a-f]+" hashes "${out}")
list(LENGTH hashes count)
list(REMOVE_DUPLICATES hashes)
list(LENGTH hashes distinct)
if(NOT count EQUAL 2 OR NOT distinct EQUAL 1)
  message(FATAL_ERROR "global: expected 2 equal parameter hashes, got: ${out}")
endif()
set(trace ${WORK_DIR}/train_cli_trace)
file(REMOVE_RECURSE ${trace})
execute_process(COMMAND ${TRAIN} ${SCENARIO} --nproc 2 --timeout-ms 20000 --trace ${trace}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE code)
if(NOT code EQUAL 1)
  message(FATAL_ERROR "in_group: exit ${code}, expected 1\n${out}\n${err}")
endif()
string(FIND "${err}" "sampler watchdog: rank 1, worker 1: the resample loop of batch 5 slot 0" at)
if(at EQUAL -1)
  message(FATAL_ERROR "in_group: no watchdog report naming rank 1, worker 1, batch 5:\n${err}")
endif()
# The real run's traces, read by `petrsim diagnose`: rank 1 is missing from the all_reduce rank
# 0 waits in, and the cause is rank 1's spinning worker.
execute_process(COMMAND ${PETRSIM} diagnose ${trace} OUTPUT_VARIABLE report ERROR_VARIABLE err RESULT_VARIABLE code)
if(NOT code EQUAL 1)
  message(FATAL_ERROR "diagnose of the real run: exit ${code}, expected 1\n${report}\n${err}")
endif()
foreach(expected "reduce_mean(num_total_pos)" "DataLoader worker 1 of rank 1 never returned batch 5")
  string(FIND "${report}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "diagnose of the real run does not say '${expected}':\n${report}")
  endif()
endforeach()
string(REGEX MATCH "default_pg +default_pg +[0-9]+ +ALLREDUCE +1 +float32 +1 +0" row "${report}")
if(row STREQUAL "")
  message(FATAL_ERROR "diagnose of the real run: expected rank 1 missing and rank 0 waiting:\n${report}")
endif()
