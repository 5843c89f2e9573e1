#!/usr/bin/env bash
# make test-busy: the suite (scripts/test.sh) with a CPU hog on every core, as on a shared CI
# machine. The hogs are busy shell loops, one per CPU (nproc; PRSYNC_BUSY_HOGS=N for another
# number), started here and stopped here by their PIDs when the suite ends, fails or is
# interrupted (EXIT, INT, TERM). Each hog also ends by itself within a second once this script
# is gone, should it be killed with SIGKILL. The suite runs in the foreground, so that Ctrl-C
# reaches it as in `make test`; a TERM sent to this script alone stops the hogs once the
# suite's current command has ended. Arguments, if any, run instead of the suite:
#   bash scripts/test-busy.sh go test -race -run TestOps ./tests/
set -euo pipefail
cd "$(dirname "$0")/.."

n=${PRSYNC_BUSY_HOGS:-$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)}
hogs=()
stop_hogs() {
  local pid
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${hogs[@]}"; do wait "$pid" 2>/dev/null || true; done
  [ ${#hogs[@]} -eq 0 ] || echo "test-busy: stopped ${#hogs[@]} CPU hogs (pids ${hogs[*]})"
  hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# the loop counts in the shell (user CPU, no system calls), and looks every ~100,000 turns
# whether this script still lives
for ((i = 0; i < n; i++)); do
  sh -c 'while kill -0 "$1" 2>/dev/null; do i=0; while [ $i -lt 100000 ]; do i=$((i + 1)); done; done' hog $$ &
  hogs+=($!)
done
echo "test-busy: $n CPU hogs (pids ${hogs[*]})"

started=$(date +%s)
if [ $# -gt 0 ]; then
  "$@"
else
  PRSYNC_TEST_TIMEOUT_SCALE=2 bash scripts/test.sh # the go test timeouts doubled
fi
echo "test-busy: passed in $(( $(date +%s) - started )) s with $n CPU hogs"
