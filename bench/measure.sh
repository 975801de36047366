# Sourced by bench/*_process.sh: `measure LABEL COMMAND...` runs COMMAND $runs times and prints
# the median wall time and the largest resident set (GNU time at /usr/bin/time).
measure() {  # label, command...
  local label="$1"; shift
  local walls=() rss=0
  for _ in $(seq "$runs"); do
    /usr/bin/time -f '%e %M' -o /tmp/petrsim_time.$$ "$@" > /dev/null || true
    read -r wall kb < <(tail -n 1 /tmp/petrsim_time.$$)  # GNU time notes a non-zero exit first
    walls+=("$wall")
    (( kb > rss )) && rss=$kb
  done
  local median
  median=$(printf '%s\n' "${walls[@]}" | sort -n | sed -n "$(( (runs + 1) / 2 ))p")
  printf '%-58s median %6.2f s  (runs: %s)  max RSS %d MiB\n' "$label" "$median" \
    "${walls[*]}" $(( rss / 1024 ))
}
