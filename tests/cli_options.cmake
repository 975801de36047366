# Options of the long commands (issue 17), through the executable:
#  - --quiet is accepted by the run, sweep and import; off a terminal no progress bar is drawn
#    (no '\r' on stderr), on one (script(1), where it exists) a bar with an ETA is, and not with
#    --quiet;
#  - --perfetto-iterations A-B and --perfetto-last SECONDS write a window of the timeline (run and
#    export); a timeline cut at its limit says so on stderr with the iteration it stops in; bad
#    windows are bad input (exit 2) naming the flag, what was expected and what was found;
#  - sample --from N and the line before the rows;
#  - the sweep's warning when --vary job.seed and --seeds overlap;
#  - the run's reproduce line repeats every --set, quoted for a shell, and reproduces the run.
# Run from the source directory (scenarios/ and tests/data/ are relative to it).
set(dir ${WORK_DIR}/cli_options)
file(REMOVE_RECURSE ${dir})
file(MAKE_DIRECTORY ${dir})
set(tiny scenarios/tiny.pbtxt)
set(global scenarios/streampetr_trainval_hang_global.pbtxt)

# Runs petrsim with ARGN; sets out, err and code in the caller.
function(petrsim)
  execute_process(COMMAND ${PETRSIM} ${ARGN} OUTPUT_VARIABLE o ERROR_VARIABLE e RESULT_VARIABLE c TIMEOUT 120)
  set(out "${o}" PARENT_SCOPE)
  set(err "${e}" PARENT_SCOPE)
  set(code "${c}" PARENT_SCOPE)
endfunction()
function(expect_code label expected)
  if(NOT code EQUAL ${expected})
    message(FATAL_ERROR "${label}: exit ${code}, expected ${expected}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
endfunction()
function(expect_in label needle haystack)
  string(FIND "${haystack}" "${needle}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${label}: expected '${needle}' in:\n${haystack}")
  endif()
endfunction()
function(expect_not_in label needle haystack)
  string(FIND "${haystack}" "${needle}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "${label}: did not expect '${needle}' in:\n${haystack}")
  endif()
endfunction()
string(ASCII 13 CR)

# --- Progress bars: --quiet is accepted; off a terminal, none.
petrsim(--quiet ${tiny})
expect_code("run --quiet" 1)
petrsim(sweep ${tiny} --seeds 2 --quiet)
expect_code("sweep --quiet" 0)
petrsim(import mmdet3d-infos tests/data/importers/mini_infos_val.pkl -o ${dir}/imported.pbtxt --quiet)
expect_code("import --quiet" 0)
# A sweep of several seconds (each run of the full fix scenario takes about 0.2 s), its stderr a
# file: no bar, not even after the first second.
petrsim(sweep ${global} --seeds 12 --jobs 1)
expect_code("sweep off a terminal" 0)
expect_not_in("sweep off a terminal" "${CR}" "${err}")
expect_not_in("sweep off a terminal" "ETA" "${err}")
set(table "${out}")
# On a terminal (script(1) gives the command one): the bar with its ETA, erased before the table;
# with --quiet, none.
find_program(SCRIPT script)
if(SCRIPT)
  foreach(quiet "" "--quiet")
    execute_process(COMMAND ${SCRIPT} -qec "${PETRSIM} sweep ${global} --seeds 12 --jobs 1 ${quiet} > ${dir}/tty_table.txt"
                            /dev/null
                    OUTPUT_VARIABLE tty ERROR_VARIABLE tty_err RESULT_VARIABLE tty_code TIMEOUT 120)
    file(READ ${dir}/tty_table.txt tty_table)
    if(NOT tty_code EQUAL 0 OR NOT tty_table STREQUAL table)
      message(FATAL_ERROR "sweep on a terminal ${quiet}: exit ${tty_code}, table:\n${tty_table}\n${tty_err}")
    endif()
    if(quiet STREQUAL "")
      expect_in("sweep on a terminal" "${CR}[" "${tty}")
      expect_in("sweep on a terminal" " runs  " "${tty}")
      expect_in("sweep on a terminal" "  ETA " "${tty}")
    else()
      expect_not_in("sweep on a terminal --quiet" "ETA" "${tty}")
    endif()
  endforeach()
else()
  message(STATUS "no script(1): the bar on a terminal is not checked")
endif()

# --- The timeline's windows and its limit.
petrsim(${tiny} --no-wall-time)
string(REGEX MATCH "virtual time ([0-9]+)\\.([0-9]+) s" _ "${out}")
set(end_ms "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")  # 1810.000 s -> 1810000 ms
# Only iterations 2..3: every slice names iteration (or batch) 2 or 3, and some were left out.
petrsim(${tiny} --perfetto ${dir}/window.json --perfetto-iterations 2-3)
expect_code("--perfetto-iterations 2-3" 1)
file(READ ${dir}/window.json timeline)
string(JSON window GET "${timeline}" otherData window iterations)
string(JSON outside GET "${timeline}" otherData records_outside_window)
string(JSON written GET "${timeline}" otherData records)
if(NOT window MATCHES "^\\[ *2, *3 *\\]$" OR outside EQUAL 0 OR written EQUAL 0)
  message(FATAL_ERROR "--perfetto-iterations 2-3: window ${window}, ${written} written, ${outside} outside")
endif()
string(REGEX MATCHALL "\"(iteration|batch)\":[0-9]+" numbers "${timeline}")
list(REMOVE_DUPLICATES numbers)
list(SORT numbers)
if(NOT numbers STREQUAL "\"batch\":2;\"batch\":3;\"iteration\":2;\"iteration\":3")
  message(FATAL_ERROR "--perfetto-iterations 2-3 wrote other iterations: ${numbers}")
endif()
# Only the last 5 virtual seconds: the window starts 5 s before the run's end.
petrsim(${tiny} --perfetto ${dir}/last.json --perfetto-last 5)
expect_code("--perfetto-last 5" 1)
file(READ ${dir}/last.json timeline)
string(JSON from_ns GET "${timeline}" otherData window from_ns)
string(JSON written GET "${timeline}" otherData records)
string(JSON outside GET "${timeline}" otherData records_outside_window)
math(EXPR expected_from "(${end_ms} - 5000) * 1000000")
if(NOT from_ns STREQUAL expected_from OR written EQUAL 0 OR outside EQUAL 0)
  message(FATAL_ERROR "--perfetto-last 5: from_ns ${from_ns} (expected ${expected_from}), ${written} written, ${outside} outside")
endif()
# Cut at its limit: said on stderr, with the iteration; not said when nothing was cut.
petrsim(${tiny} --perfetto ${dir}/cut.json --perfetto-records-max 50)
expect_code("--perfetto-records-max 50" 1)
expect_in("cut timeline" "petrsim: --perfetto: ${dir}/cut.json stops in iteration 0, at virtual time 0." "${err}")
expect_in("cut timeline" "its limit of 50 records was reached" "${err}")
expect_in("cut timeline" "--perfetto-iterations A-B" "${err}")
petrsim(${tiny} --perfetto ${dir}/whole.json)
expect_not_in("whole timeline" "--perfetto" "${err}")
# export: the same windows and notice, on the recording's clock.
petrsim(${tiny} --trace ${dir}/trace)
petrsim(export ${dir}/trace --perfetto ${dir}/export.json --perfetto-iterations 1-1 --perfetto-records-max 5)
expect_code("export with a window" 0)
expect_in("export cut" "stops in iteration 1, at " "${err}")
expect_in("export cut" "s of the recording's clock" "${err}")
file(READ ${dir}/export.json timeline)
string(JSON window GET "${timeline}" otherData window iterations)
if(NOT window MATCHES "^\\[ *1, *1 *\\]$")
  message(FATAL_ERROR "export --perfetto-iterations 1-1: window ${window}")
endif()
# Bad windows: exit 2, nothing on stdout, no timeline, the flag, what was expected and found.
foreach(case
    "--perfetto-iterations|5-2|expected A-B, the first and last iteration to write, whole numbers with A <= B (e.g. 100-200), got '5-2' (5 > 2)"
    "--perfetto-iterations|x|expected A-B, the first and last iteration to write, whole numbers with A <= B (e.g. 100-200), got 'x'"
    "--perfetto-iterations|-3-5|got '-3-5'"
    "--perfetto-last|x|expected a number of seconds > 0 and <= 1000000000 (the end of the run minus that is where the timeline starts, e.g. 60 or 2.5), got 'x'"
    "--perfetto-last|-5|got '-5'"
    "--perfetto-last|0|got '0'")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 flag)
  list(GET parts 1 value)
  list(GET parts 2 expected)
  foreach(command "${tiny}" "export;${dir}/trace")
    file(REMOVE ${dir}/bad.json)
    petrsim(${command} --perfetto ${dir}/bad.json "${flag}=${value}")
    expect_code("${command} ${flag}=${value}" 2)
    expect_in("${command} ${flag}=${value}" "petrsim: error: ${flag}: expected " "${err}")
    expect_in("${command} ${flag}=${value}" "${expected}" "${err}")
    if(NOT out STREQUAL "" OR EXISTS ${dir}/bad.json OR EXISTS ${dir}/bad.json.tmp)
      message(FATAL_ERROR "${command} ${flag}=${value}: wrote something:\n${out}")
    endif()
  endforeach()
endforeach()
petrsim(${tiny} --perfetto-last 5)
expect_code("--perfetto-last without --perfetto" 2)
expect_in("--perfetto-last without --perfetto" "need --perfetto FILE" "${err}")

# --- sample --from: the same rows as without it, from iteration N on, after a line counting them.
petrsim(sample ${tiny})
string(REGEX MATCHALL "\n +[3-9] [^\n]*|\n +1[01] [^\n]*" all_rows "${out}")
petrsim(sample ${tiny} --from 3)
expect_code("sample --from 3" 0)
string(REGEX MATCHALL "\n +[0-9]+ [^\n]*" from_rows "${out}")
list(LENGTH from_rows count)
if(NOT from_rows STREQUAL all_rows OR NOT out MATCHES "^iterations 3\\.\\.11 of 12, ranks 0-1: ${count} rows\n")
  message(FATAL_ERROR "sample --from 3 (${count} rows):\n${out}")
endif()
petrsim(sample ${tiny} --from 2 --iterations 2 --ranks 1)
if(NOT out MATCHES "^iterations 2\\.\\.3 of 12, rank 1: 2 rows\niteration +rank[^\n]*\n +2 +1 [^\n]*\n +3 +1 [^\n]*\n$")
  message(FATAL_ERROR "sample --from 2 --iterations 2 --ranks 1:\n${out}")
endif()
foreach(case "12|--from: iteration 12 is beyond the end of the job: it has 12 iterations (0..11)"
             "-1|--from: expected a whole number >= 0, the first iteration to print, got '-1'"
             "x|--from: expected a whole number >= 0, the first iteration to print, got 'x'")
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 value)
  list(GET parts 1 expected)
  petrsim(sample ${tiny} "--from=${value}")
  expect_code("sample --from=${value}" 2)
  expect_in("sample --from=${value}" "petrsim: error: ${expected}" "${err}")
  if(NOT out STREQUAL "")
    message(FATAL_ERROR "sample --from=${value}: wrote to stdout:\n${out}")
  endif()
endforeach()

# --- The sweep's job seeds: overlapping ones are named; spaced ones are not.
petrsim(sweep ${tiny} --vary job.seed=0,1,2 --seeds 4 --jobs 1)
expect_code("sweep overlapping job seeds" 0)
expect_in("sweep overlapping job seeds"
          "petrsim sweep: warning: --vary job.seed=0,1,2 with --seeds 4: run i of a combination uses job.seed + i, so job.seed=0 and job.seed=1 both run job seeds 1..3"
          "${err}")
petrsim(sweep ${tiny} --vary job.seed=0,4,8 --seeds 4 --jobs 1)
expect_not_in("sweep disjoint job seeds" "warning" "${err}")

# --- The reproduce line: every --set, quoted where a shell needs it; run as printed, it
# reproduces the run (the same trace hash).
petrsim(${tiny} --set "name=a b" --set resample.policy=global --set "description=it's")
expect_code("run with --set" 0)
string(REGEX MATCH "reproduce   (petrsim [^\n]*) \\(seed [0-9]+, job.seed [0-9]+, trace hash ([0-9a-f]+)\\)" line "${out}")
set(command "${CMAKE_MATCH_1}")
set(hash "${CMAKE_MATCH_2}")
if(NOT command STREQUAL "petrsim ${tiny} --set 'name=a b' --set resample.policy=global --set 'description=it'\\''s'")
  message(FATAL_ERROR "reproduce line: '${command}'\n${out}")
endif()
string(REGEX REPLACE "^petrsim " "" arguments "${command}")
execute_process(COMMAND sh -c "\"$0\" ${arguments}" ${PETRSIM} OUTPUT_VARIABLE again RESULT_VARIABLE again_code)
expect_in("reproduced run" "trace hash ${hash})" "${again}")
expect_in("reproduced run" "--set 'name=a b'" "${again}")
petrsim(${tiny} --set resample.policy=in_group)
string(REGEX MATCH "trace hash ([0-9a-f]+)" _ "${out}")
if(CMAKE_MATCH_1 STREQUAL hash)
  message(FATAL_ERROR "the policy changes nothing in the trace hash: the check above proves nothing")
endif()

# --- A mistyped command is named with the nearest one; help reaches nested commands.
petrsim(chek ${tiny})
expect_code("a typo of check" 2)
expect_in("a typo of check" "petrsim: error: 'chek' is not a command (nor a scenario file): did you mean 'check'?" "${err}")
petrsim(help import mmdet3d-config)
expect_code("help of a nested command" 0)
expect_in("help of a nested command" "--data-root" "${out}")
petrsim(help import nope)
expect_code("help of no command" 2)
expect_in("help of no command" "help: no command named 'import nope'" "${err}")
