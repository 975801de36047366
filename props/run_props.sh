#!/bin/sh
# Runs one property program with rapidcheck's parameters: $PETRSIM_RC_PARAMS when set (a soak,
# e.g. PETRSIM_RC_PARAMS="max_success=100000"), else the program's default from CMake ($1).
# Usage: run_props.sh DEFAULT_RC_PARAMS PROGRAM [ARGS...]
default="$1"
shift
RC_PARAMS="${PETRSIM_RC_PARAMS:-$default}" exec "$@"
