#!/usr/bin/env bash
# bench/nagle.sh: what an rsync daemon's "socket options = TCP_NODELAY" does to short
# sessions (issue 23, README "A daemon's own socket options").
#
# Two daemons on 127.0.0.1 (free ports) serve the same small tree read-only, one with
# rsyncd.conf's default socket options (Nagle on) and one with TCP_NODELAY. The same
# pull of a few small files runs against each in turn, side by side, and the wall time
# of each session is printed as a distribution. Each daemon is stopped by its PID on exit.
#
#   bench/nagle.sh                  # 60 sessions each, 20 files of 1 KB
#   bench/nagle.sh --sessions 20 --files 200
set -euo pipefail
export LC_ALL=C

sessions=60 files=20
while [ $# -gt 0 ]; do
	case "$1" in
	--sessions) sessions=$2; shift ;;
	--files) files=$2; shift ;;
	-h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "nagle.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
command -v rsync >/dev/null || { echo "nagle.sh: rsync is needed" >&2; exit 1; }

W=$(mktemp -d /tmp/prsync-nagle.XXXXXX)
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$W"
}
trap cleanup EXIT

mkdir -p "$W/src/d"
for ((i = 0; i < files; i++)); do head -c 1000 /dev/zero | tr '\0' "$((i % 10))" >"$W/src/d/f$i"; done
(cd "$W/src" && find d -type f) >"$W/list"

free_port() {
	local p
	for p in $(seq "$1" $(($1 + 200))); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
	done
	return 1
}

# start NAME SOCKOPTS: a daemon; sets PORT_<NAME>
start() {
	local d=$W/$1 port
	mkdir -p "$d"
	port=$(free_port $((18900 + ${#PIDS[@]} * 300)))
	{
		echo "pid file = $d/pid"
		echo "lock file = $d/lock"
		echo "use chroot = no"
		echo "log file = $d/log"
		[ -z "$2" ] || echo "socket options = $2"
		echo "[src]"
		echo "	path = $W/src"
		echo "	read only = true"
		[ "$(id -u)" != 0 ] || printf '\tuid = root\n\tgid = root\n'
	} >"$d/rsyncd.conf"
	rsync --daemon --no-detach --address=127.0.0.1 --port="$port" --config="$d/rsyncd.conf" &
	PIDS+=($!)
	for ((i = 0; i < 50; i++)); do
		rsync "rsync://127.0.0.1:$port/" >/dev/null 2>&1 && break
		sleep 0.1
	done
	printf -v "PORT_$1" '%s' "$port"
}
start default ""
start nodelay TCP_NODELAY

# one session; prints its wall milliseconds
session() {
	local s e
	rm -rf "$W/dst"
	s=$(date +%s%N)
	rsync -a --sockopts=TCP_NODELAY --files-from="$W/list" "rsync://127.0.0.1:$1/src/" "$W/dst/"
	e=$(date +%s%N)
	echo $(((e - s) / 1000000))
}
for ((n = 0; n < sessions; n++)); do
	echo "default $(session "$PORT_default")"
	echo "nodelay $(session "$PORT_nodelay")"
done >"$W/times"

echo "$sessions sessions each, pulling $files files of 1 KB from a daemon on 127.0.0.1, alternating:"
for k in default nodelay; do
	awk -v k="$k" '$1 == k {print $2}' "$W/times" | sort -n | awk -v k="$k" '{a[NR] = $1}
		END {printf "  socket options %-12s min %4d  p25 %4d  median %4d  p75 %4d  p90 %4d  max %4d ms\n",
			(k == "default" ? "(none)" : "= TCP_NODELAY"), a[1], a[int(NR / 4) + 1], a[int(NR / 2) + 1], a[int(3 * NR / 4) + 1], a[int(0.9 * NR) + 1], a[NR]}'
done
