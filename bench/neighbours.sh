#!/usr/bin/env bash
# bench/neighbours.sh: two prsyncs against one rsync daemon's max connections (issue 45,
# "two instances against one daemon's limit: the slower ≤ 1.5 × the faster").
#
# gentree's small tree (50,000 files, 1.09 GB) is split in two lists, every other path. A
# daemon on 127.0.0.1 with `max connections = N` takes both: prsync A pushes one half to
# MODULE/a/, prsync B the other to MODULE/b/, with prsync's defaults. Each repetition runs
# them at once, then with B started a second after A. It prints each one's wall time (its
# summary's seconds), the ratio of the slower to the faster, their retries, and checks that
# DEST holds every file of both halves with its size. Each run's events are kept in
# WORK/neighbours/runs/LABEL-REP-STAGGER-{a,b}.jsonl, their stderr in .err.
#
#   bench/neighbours.sh                    # 3 reps, max connections 3
#   bench/neighbours.sh --reps 5 --maxconn 4
#   PRSYNC=/path/to/prsync bench/neighbours.sh --label old   # that build, not this tree's
#   bench/neighbours.sh --prsync-opts --no-throttle   # flags for both prsyncs
set -euo pipefail
export LC_ALL=C

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$BENCH_DIR/.." && pwd -P)
ME=neighbours.sh
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"

REPS=3 MAXCONN=3 LABEL=run OPTS=${BENCH_PRSYNC_OPTS:-} WORK=${BENCH_WORK:-/var/tmp/prsync-bench}
while [ $# -gt 0 ]; do
	case "$1" in
	--reps) REPS=$2; shift ;;
	--maxconn) MAXCONN=$2; shift ;;
	--work) WORK=$2; shift ;;
	--label) LABEL=$2; shift ;;
	--prsync-opts) OPTS=$2; shift ;;
	-h | --help) sed -n '2,18p' "$0"; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
have rsync || die "rsync is not installed"
have python3 || die "python3 is needed for the summaries"

T=$WORK/neighbours
mkdir -p "$T/bin"
(cd "$BENCH_DIR" && go build -o "$T/bin/" ./cmd/gentree) || die "go build of gentree failed"
PRSYNC_BIN=${PRSYNC:-}
if [ -z "$PRSYNC_BIN" ]; then
	(cd "$REPO" && go build -o "$T/bin/prsync" .) || die "go build of prsync failed"
	PRSYNC_BIN=$T/bin/prsync
fi
SRC=$T/small
[ -d "$SRC" ] || "$T/bin/gentree" -profile small -out "$SRC" >/dev/null || die "gentree failed"
(cd "$SRC" && find . -type f -printf '%P\0') | python3 -c '
import sys
paths = [p for p in sys.stdin.buffer.read().split(b"\0") if p]
for name, half in (("a", paths[0::2]), ("b", paths[1::2])):
    open(sys.argv[1] + "/half." + name, "wb").write(b"\0".join(half) + b"\0")
' "$T"

DST=$T/dst
mkdir -p "$DST"
PORT=$(free_port 18930) || die "no free port"
cat >"$T/rsyncd.conf" <<CONF
pid file = $T/rsyncd.pid
lock file = $T/rsyncd.lock
use chroot = no
max connections = $MAXCONN
[w]
	path = $DST
	read only = false
CONF
[ "$(id -u)" != 0 ] || printf '\tuid = root\n\tgid = root\n' >>"$T/rsyncd.conf"
rsync --daemon --no-detach --address=127.0.0.1 --port="$PORT" --config="$T/rsyncd.conf" >"$T/rsyncd.out" 2>&1 &
D_PID=$!
trap 'kill "$D_PID" 2>/dev/null || true; wait "$D_PID" 2>/dev/null || true' EXIT
for ((i = 0; i < 50; i++)); do rsync "rsync://127.0.0.1:$PORT/" >/dev/null 2>&1 && break; sleep 0.1; done

say "== $REPS reps, max connections $MAXCONN, 2 x 25,000 files, daemon on 127.0.0.1:$PORT, prsync ${OPTS:-defaults}"
printf 'rep\tstagger_s\ta_s\tb_s\tslower_per_faster\tretries_a\tretries_b\tcheck\n'
for ((rep = 1; rep <= REPS; rep++)); do
	for stagger in 0 1; do
		rm -rf "${DST:?}"/*
		# shellcheck disable=SC2086 # OPTS is words
		"$PRSYNC_BIN" -0 $OPTS --root "$SRC" "rsync://127.0.0.1:$PORT/w/a/" <"$T/half.a" >"$T/a.jsonl" 2>"$T/a.err" &
		A=$!
		sleep "$stagger"
		# shellcheck disable=SC2086
		"$PRSYNC_BIN" -0 $OPTS --root "$SRC" "rsync://127.0.0.1:$PORT/w/b/" <"$T/half.b" >"$T/b.jsonl" 2>"$T/b.err" &
		B=$!
		ra=0 rb=0
		wait "$A" || ra=$?
		wait "$B" || rb=$?
		check=ok
		mkdir -p "$T/runs"
		cp "$T/a.jsonl" "$T/runs/$LABEL-$rep-$stagger-a.jsonl"
		cp "$T/b.jsonl" "$T/runs/$LABEL-$rep-$stagger-b.jsonl"
		cp "$T/a.err" "$T/runs/$LABEL-$rep-$stagger-a.err"
		cp "$T/b.err" "$T/runs/$LABEL-$rep-$stagger-b.err"
		[ "$ra" = 0 ] && [ "$rb" = 0 ] || check="FAIL: exit $ra and $rb"
		for h in a b; do
			# every path of the half, with the source's size
			python3 - "$SRC" "$DST/$h" "$T/half.$h" <<'PY' || check="FAIL: $h incomplete"
import os, sys
src, dst, lst = sys.argv[1:]
for p in open(lst, "rb").read().split(b"\0"):
    if p and os.path.getsize(os.path.join(src.encode(), p)) != os.path.getsize(os.path.join(dst.encode(), p)):
        sys.exit(1)
PY
		done
		python3 - "$T/a.jsonl" "$T/b.jsonl" "$rep" "$stagger" "$check" <<'PY'
import json, sys
s = []
for f in sys.argv[1:3]:
    e = [json.loads(l) for l in open(f) if '"summary"' in l]
    s.append(e[-1] if e else {"seconds": float("nan"), "retries": -1})
a, b = s[0]["seconds"], s[1]["seconds"]
print(f"{sys.argv[3]}\t{sys.argv[4]}\t{a:.2f}\t{b:.2f}\t{max(a, b) / min(a, b):.2f}\t{s[0]['retries']}\t{s[1]['retries']}\t{sys.argv[5]}")
PY
	done
done
