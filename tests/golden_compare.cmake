# Runs petrsim with ARGS on SCENARIO and compares stdout with the golden file EXPECTED, and the
# exit code with EXIT. Prints a diff-friendly message on mismatch.
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
file(READ ${EXPECTED} expected)
if(NOT actual STREQUAL expected)
  get_filename_component(name ${EXPECTED} NAME)
  file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/actual_${name} "${actual}")
  message(FATAL_ERROR "output differs from ${EXPECTED}; actual output written to "
                      "${CMAKE_CURRENT_BINARY_DIR}/actual_${name}; run: diff ${EXPECTED} "
                      "${CMAKE_CURRENT_BINARY_DIR}/actual_${name}")
endif()
