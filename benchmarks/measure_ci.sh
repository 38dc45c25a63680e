#!/usr/bin/env bash
# Measure the whole CI job as CI runs it: a fresh clone of HEAD, `bash .ci/run`, its
# wall time and its disk peak (filesystem usage sampled every 2 s, minus the usage at
# the start; the clone, the test environments if they must be built, and everything
# the tests write count). Prints one summary line; the CI log goes to $OUT_LOG.
#   bash benchmarks/measure_ci.sh            (OUT_LOG default: /tmp/mmrepro-ci.log)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
log="${OUT_LOG:-/tmp/mmrepro-ci.log}"
clone="$(mktemp -d)/mmrepro"
start_used=$(df -B1 --output=used /tmp | tail -n1)
peak_file="$(mktemp)"
echo "$start_used" > "$peak_file"
( while :; do u=$(df -B1 --output=used /tmp | tail -n1)
    [ "$u" -gt "$(cat "$peak_file")" ] && echo "$u" > "$peak_file"; sleep 2; done ) &
sampler=$!
t0=$(date +%s)
git clone -q "$root" "$clone"
(cd "$clone" && CI=true bash .ci/run) > "$log" 2>&1
status=$?
t1=$(date +%s)
kill "$sampler" 2>/dev/null
peak=$(( $(cat "$peak_file") - start_used ))
rm -rf "$(dirname "$clone")" "$peak_file"
printf 'ci: exit %d, wall %dm%02ds, disk peak %.2f GB above the start (log: %s)\n' \
  "$status" $(( (t1 - t0) / 60 )) $(( (t1 - t0) % 60 )) "$(echo "$peak / 1000000000" | bc -l)" "$log"
grep -E "^(== |=+ .*(passed|failed))" "$log" || true
exit "$status"
