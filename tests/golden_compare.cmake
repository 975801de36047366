# Runs petrsim with ARGS on SCENARIO and compares stdout with the golden file EXPECTED, and the
# exit code with EXIT. On a mismatch writes the actual output to OUT_DIR/actual_<golden file>
# (under the build directory: nothing is written into the source tree) and says how to diff it.
# With RECORD: first simulate RECORD with --trace into a fresh directory under WORK_DIR, which
# becomes SCENARIO (for the reports of `diagnose`, `replay` and the like on a recorded run); the
# report names it TRACE_DIR wherever it prints that path.
if(DEFINED RECORD)
  set(SCENARIO ${WORK_DIR}/golden_trace_${NAME})
  file(REMOVE_RECURSE ${SCENARIO})
  execute_process(COMMAND ${PETRSIM} ${RECORD} --trace ${SCENARIO} OUTPUT_QUIET RESULT_VARIABLE recorded)
  if(NOT recorded EQUAL 0 AND NOT recorded EQUAL 1)
    message(FATAL_ERROR "petrsim ${RECORD} --trace ${SCENARIO}: exit code ${recorded}")
  endif()
endif()
separate_arguments(args UNIX_COMMAND "${ARGS}")
list(GET args 0 subcommand)
list(REMOVE_AT args 0)
execute_process(
  COMMAND ${PETRSIM} ${subcommand} ${SCENARIO} ${args}
  OUTPUT_VARIABLE actual
  ERROR_VARIABLE errors
  RESULT_VARIABLE exit_code)
if(NOT exit_code STREQUAL "${EXIT}")
  message(FATAL_ERROR "petrsim ${ARGS} ${SCENARIO}: exit code ${exit_code}, expected ${EXIT}\n${errors}")
endif()
if(DEFINED RECORD)
  string(REPLACE "${SCENARIO}" "TRACE_DIR" actual "${actual}")
endif()
file(READ ${EXPECTED} expected)
if(NOT actual STREQUAL expected)
  get_filename_component(name ${EXPECTED} NAME)
  if(NOT DEFINED OUT_DIR)
    message(FATAL_ERROR "golden_compare.cmake: OUT_DIR (a directory under the build tree) is not set")
  endif()
  file(MAKE_DIRECTORY ${OUT_DIR})
  file(WRITE ${OUT_DIR}/actual_${name} "${actual}")
  message(FATAL_ERROR "output differs from ${EXPECTED}; actual output written to "
                      "${OUT_DIR}/actual_${name}; run: diff ${EXPECTED} ${OUT_DIR}/actual_${name}")
endif()
