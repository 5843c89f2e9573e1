#!/usr/bin/env bash
# bench/throttle.sh: does prsync's throttle protect another CPU-bound job?
#
# A fixed CPU-bound job (gzip -6 of a fixed 96 MB file) runs three ways, side by side in one
# run, REPS times (interleaved): alone, beside a big prsync copy with --no-throttle, and
# beside the same copy with the default thresholds (80/60 %). It prints the job's and the
# copy's wall times and slowdowns (medians, min–max) as a markdown table.
#
#   bench/throttle.sh            # 3 repetitions, profile small (~50k files, ~1 GB)
#   REPS=5 PROFILE=many bench/throttle.sh
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd -P)
repo=$(cd "$here/.." && pwd -P)
REPS=${REPS:-3}
PROFILE=${PROFILE:-small}
WORK=${WORK:-/var/tmp/prsync-throttle-bench}
mkdir -p "$WORK"
PRSYNC=${PRSYNC:-$WORK/prsync}
(cd "$repo" && go build -o "$PRSYNC" .)
src=$WORK/src-$PROFILE
if [ ! -d "$src" ]; then
  echo "throttle.sh: generating the $PROFILE tree in $src" >&2
  (cd "$here" && go run ./cmd/gentree -profile "$PROFILE" -seed 1 -out "$src") >&2
fi
job_input=$WORK/job.input
if [ ! -f "$job_input" ]; then
  # compressible but not trivially: base64 of seeded pseudo-random bytes
  python3 -c "
import random,base64,sys
r=random.Random(7); out=sys.stdout.buffer
for _ in range(96): out.write(base64.b64encode(r.randbytes(786432)))" >"$job_input"
fi
list=$WORK/list
find "$src" -type f -print0 >"$list"

now() { date +%s.%N; }
job() { gzip -6 -c "$job_input" >/dev/null; }
copy() { # $1: extra prsync flags; fresh destination each time
  rm -rf "$WORK/dst"; sync
  "$PRSYNC" -0 --root "$src" $1 "$WORK/dst/" <"$list" >"$WORK/events.jsonl"
}
calc() { awk "BEGIN { printf \"%.3f\", $* }"; }
timed() { local t0; t0=$(now); "$@"; calc "$(now) - $t0"; }

declare -A T
for r in $(seq 1 "$REPS"); do
  T[job_alone,$r]=$(timed job)
  T[copy_alone_nothrottle,$r]=$(timed copy --no-throttle)
  T[copy_alone_default,$r]=$(timed copy "")
  for mode in nothrottle default; do
    flags=""; [ $mode = nothrottle ] && flags=--no-throttle
    t0=$(now)
    copy "$flags" & cp=$!
    sleep 0.5
    T[job_$mode,$r]=$(timed job)
    wait $cp
    T[copy_$mode,$r]=$(calc "$(now) - $t0")
    T[susp_$mode,$r]=$(tail -n 1 "$WORK/events.jsonl" | python3 -c 'import json,sys; print(json.load(sys.stdin)["suspensions"])')
  done
  echo "rep $r: job alone ${T[job_alone,$r]} s; beside --no-throttle ${T[job_nothrottle,$r]} s; beside default ${T[job_default,$r]} s" >&2
done

stats() { # name → "median (min–max)"
  local k=$1; for r in $(seq 1 "$REPS"); do echo "${T[$k,$r]}"; done | sort -g | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f (%.2f–%.2f)", m, a[1], a[NR]}'
}
med() { local k=$1; for r in $(seq 1 "$REPS"); do echo "${T[$k,$r]}"; done | sort -g | awk '{a[NR]=$1} END {print (NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2}'; }
ja=$(med job_alone)
cn=$(med copy_alone_nothrottle); cd_=$(med copy_alone_default)
echo
echo "Throttle benchmark: $(nproc) CPUs, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -sr), $(rsync --version | head -n1 | awk '{print "rsync "$3}'), $(date -u +%Y-%m-%d), profile $PROFILE, $REPS reps, median (min–max) seconds"
echo
echo "| run | gzip job | job slowdown | copy | copy slowdown | suspensions (median) |"
echo "|---|---|---|---|---|---|"
echo "| job alone | $(stats job_alone) | 1.00× | | | |"
echo "| copy alone, --no-throttle | | | $(stats copy_alone_nothrottle) | 1.00× | |"
echo "| copy alone, default throttle | | | $(stats copy_alone_default) | $(calc "$cd_/$cn")× | |"
for mode in nothrottle default; do
  label="--no-throttle"; [ $mode = default ] && label="default throttle (80/60)"
  echo "| job beside copy, $label | $(stats job_$mode) | $(calc "$(med job_$mode)/$ja")× | $(stats copy_$mode) | $(calc "$(med copy_$mode)/$cn")× | $(med susp_$mode) |"
done
