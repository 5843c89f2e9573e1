#!/usr/bin/env bash
# bench/scenarios.sh: the seven scenarios of issue 23, side by side in one run.
#
#   1 nas-fresh    a 1,000-file list of the small profile into an sshfs mount
#                  (sshfs -o max_conns=8) served by an sshd on 127.0.0.1 through a
#                  toxiproxy latency proxy (1 ms each way: cmd/latproxy)
#   2 nas-incr     the same mount; 20,000 files already in DEST, 1,000 changed in SRC
#   3 local        the small tree (50,000 files), cold cache
#   4 usr          find /usr -xdev -print0 | prsync -0 DEST -- -H against rsync -aH
#   5 capped       --net: 100 Mbit/s per TCP stream, 2 Gbit/s in all, to a daemon
#   6 maxconn      a daemon on 127.0.0.1 with max connections = 3
#   7 pull         from a daemon on 127.0.0.1 (--root rsync://...)
#   8 capped-large 5 with the whole small tree (50,000 files, ~1.09 GB): 12,000 files
#                  (72 MB) took one rsync -a 2.8 s here (H49); one rsync -a takes 20 s or more,
#                  so that start costs stop hiding what the policy does (issue 45)
#   9 maxconn-large 6 with the "swarm" profile (600,000 tiny files; "many", 200,000,
#                  took one rsync -a 7.5 s in H49)
#  10 pull-large   7 with the "swarm" profile
#
# Each scenario runs prsync's defaults, one rsync -a, and a sweep of chunk size x jobs
# for GNU parallel + rsync, fpsync and prsync (--chunk-files C -j J). Every copy is
# compared with its source (a tree listing plus checksums); a copy that differs is a
# FAIL and never the best of anything. See bench/README.md (Seven scenarios).
#
#   bench/scenarios.sh                    # 1 to 7, 5 repetitions, sweep {250,2000} x {1,2,4,8,16}
#   bench/scenarios.sh --scenarios "8 9 10" --tools "rsync rsync-list prsync-default prsync"
#   bench/scenarios.sh --quick            # 1 repetition, sweep {250,2000} x {8}
#   bench/scenarios.sh --smoke            # tiny trees, scenarios 1 (when sshfs exists), 6, 7 (CI)
#   bench/scenarios.sh --scenarios "1 3" --reps 3
set -euo pipefail
export LC_ALL=C

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$BENCH_DIR/.." && pwd -P)
ME=scenarios.sh
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"

REPS=${BENCH_REPS:-5}
SCENARIOS=${BENCH_SCENARIOS:-"1 2 3 4 5 6 7"}
LARGE_NET_FILES=${BENCH_LARGE_NET_FILES:-50000}
LARGE_TREE=${BENCH_LARGE_TREE:-swarm}
CHUNKS=${BENCH_CHUNKS:-"250 2000"}
JOBS=${BENCH_JOBS:-"1 2 4 8 16"}
TOOLS=${BENCH_TOOLS:-"rsync rsync-list prsync-default prsync parallel fpsync"}
SEED=${BENCH_SEED:-1}
WORK=${BENCH_WORK:-/var/tmp/prsync-bench}
OUT=${BENCH_OUT:-}
PRSYNC=${PRSYNC:-}
PRSYNC_BASE=${BENCH_PRSYNC_BASE:-}
DROP=${BENCH_DROP_CACHES:-auto}
USR_ROOT=${BENCH_USR:-/usr}
LATENCY=${BENCH_LATENCY:-1ms}
MAX_CONNS=${BENCH_SSHFS_CONNS:-8}
NET_STREAM=${BENCH_NET_STREAM:-100mbit}
NET_LINK=${BENCH_NET_LINK:-2gbit}
DAEMON_MAXCONN=${BENCH_DAEMON_MAXCONN:-3}
# the daemons' "socket options" (scenarios 5 to 7): none, as rsyncd.conf has by default
DAEMON_SOCKOPTS=${BENCH_DAEMON_SOCKOPTS:-}
export DAEMON_SOCKOPTS
LABEL=${BENCH_LABEL:-}
RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-900}
PRSYNC_OPTS=${BENCH_PRSYNC_OPTS:-}
PUBLISH=0
SMOKE=0
SAMPLE_N=${BENCH_SAMPLE:-50}
PERFILE_N=500
# Files per scenario (subsets of the small tree; tiny in --smoke).
NAS_FILES=1000 NAS_BASE=${BENCH_NAS_BASE:-20000} NAS_CHANGED=${BENCH_NAS_CHANGED:-1000} NET_FILES=5000 DAEMON_FILES=10000 TREE=small

usage() {
	cat <<EOF
usage: bench/scenarios.sh [options]

  --scenarios LIST   any of 1..10 (default "1 2 3 4 5 6 7"; 8-10 large)  [BENCH_SCENARIOS]
  --reps N           repetitions, interleaved; medians of N (default 5)    [BENCH_REPS]
  --chunks LIST      files per chunk of the sweep (default "250 2000")     [BENCH_CHUNKS]
  --jobs LIST        jobs of the sweep (default "1 2 4 8 16")              [BENCH_JOBS]
  --tools LIST       subset of: rsync prsync-default prsync-auto prsync parallel fpsync
                     rsync-list (one rsync -a --files-from with the whole list)
                     prsync-base (defaults, with --prsync-base)
                     prsync-trust (defaults and -- --trust-sender; the pull,
                     scenario 7, only)                                     [BENCH_TOOLS]
  --quick            --reps 1 --jobs 8 (the chunk sweep stays)
  --smoke            tiny trees, 1 rep, rsync -a, rsync-list and prsync's defaults
                     (--no-throttle); scenarios 1 (5 files; skipped without
                     sshd, sshfs or FUSE), 6 and 7
  --out DIR          results (default /tmp/prsync-bench/scenarios-DATE)    [BENCH_OUT]
  --work DIR         trees and destinations (default /var/tmp/prsync-bench; one run
                     at a time per DIR: a second fails at once)             [BENCH_WORK]
  --prsync PATH      the prsync binary (default: built from the checkout)  [PRSYNC]
  --prsync-base PATH another prsync, run with its defaults as prsync-base,
                     side by side (a build before a change)              [BENCH_PRSYNC_BASE]
  --tree PROFILE     the generated tree the others are cut from (default
                     small; tiny to try the setup)                        [BENCH_TREE]
  --usr DIR          the real tree of scenario 4 (default /usr)            [BENCH_USR]
  --prsync-opts STR extra flags for every prsync method (default none;
                     --smoke: --no-throttle)                               [BENCH_PRSYNC_OPTS]
  --label STR        a label for the report's title (e.g. "before X")     [BENCH_LABEL]
  --no-drop-caches   keep the page cache warm                              [BENCH_DROP_CACHES=0]
  --publish          write bench/results-scenarios.csv and the section of
                     bench/RESULTS.md between its scenario markers
Per scenario S, BENCH_CHUNKS_S<S> and BENCH_JOBS_S<S> replace the sweep
(BENCH_CHUNKS_S4=2000 BENCH_JOBS_S4=4). In scenario 6 the peers also run with
-j <max connections>: they cannot absorb a refused session.
BENCH_RUN_TIMEOUT (900): seconds before a run is ended and counted as a FAIL.
BENCH_NAS_BASE (20000), BENCH_NAS_CHANGED (1000): scenario 2's DEST and changes.
Knobs: BENCH_LATENCY (1ms each way), BENCH_SSHFS_CONNS (8), BENCH_NET_STREAM
(100mbit), BENCH_NET_LINK (2gbit), BENCH_DAEMON_MAXCONN (3), BENCH_SAMPLE (50),
BENCH_DAEMON_SOCKOPTS (none: the daemons' "socket options", such as TCP_NODELAY).
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--scenarios) SCENARIOS=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--chunks) CHUNKS=$2; shift ;;
	--jobs) JOBS=$2; shift ;;
	--tools) TOOLS=$2; shift ;;
	--quick) REPS=1 JOBS=8 ;;
	--smoke) SMOKE=1 ;;
	--out) OUT=$2; shift ;;
	--work) WORK=$2; shift ;;
	--prsync) PRSYNC=$2; shift ;;
	--prsync-base) PRSYNC_BASE=$2; shift ;;
	--usr) USR_ROOT=$2; shift ;;
	--tree) TREE_OPT=$2; shift ;;
	--label) LABEL=$2; shift ;;
	--prsync-opts) PRSYNC_OPTS=$2; shift ;;
	--no-drop-caches) DROP=0 ;;
	--publish) PUBLISH=1 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
if [ "$SMOKE" = 1 ]; then
	# prsync's CPU throttle would suspend rsyncs for as long as the machine is
	# busy (CI runs other work): the smoke turns it off to stay within seconds.
	REPS=1 CHUNKS=100 JOBS=2 TOOLS="rsync rsync-list prsync-default prsync-auto" SCENARIOS="1 6 7" TREE=tiny DROP=0
	NAS_FILES=5 DAEMON_FILES=496 SAMPLE_N=20 PRSYNC_OPTS=${BENCH_PRSYNC_OPTS:---no-throttle}
fi
TREE=${TREE_OPT:-${BENCH_TREE:-$TREE}}
case "$REPS" in '' | *[!0-9]* | 0) die "--reps must be a positive integer" ;; esac
for s in $SCENARIOS; do case "$s" in [1-9] | 10) ;; *) die "unknown scenario $s (1..10)" ;; esac; done
for c in $CHUNKS $JOBS; do case "$c" in '' | *[!0-9]* | 0) die "bad sweep value $c" ;; esac; done

STAMP=$(date +%Y%m%d-%H%M%S)
OUT=$(realpath -m "${OUT:-/tmp/prsync-bench/scenarios-$STAMP}")
WORK=$(realpath -m "$WORK")
for d in "$OUT" "$WORK"; do
	case "$d/" in "$REPO"/*) die "$d is inside the repository; use a directory under /tmp or /var/tmp" ;; esac
done
mkdir -p "$OUT/logs" "$OUT/ref" "$WORK/scen"
# one run at a time per WORK: two share its destinations, and each would delete what the
# other copies (a run that found the lock held fails at once rather than measure that)
if command -v flock >/dev/null; then
	exec 9>"$WORK/.lock"
	flock -n 9 || die "another bench/scenarios.sh is using $WORK (wait for it, or give --work)"
fi
IS_ROOT=0
[ "$(id -u)" = 0 ] && IS_ROOT=1
BIN=$WORK/bin
bench_build_tools "$BIN" "$OUT/logs" gentree measure latproxy scenreport plotchunks
[ -n "$PRSYNC" ] || die "no prsync binary"
bench_drop_setup
T0=$(date +%s)
SC=$WORK/scen
RESULTS=$OUT/results.csv
echo "scenario,name,method,tool,chunk,jobs,rep,wall_s,user_s,sys_s,maxrss_kb,exit,verify,chunks,suspended_s,retries" >"$RESULTS"
FAILURES=0
SKIPPED=()

# ---------------------------------------------------------------- cleanup
SSHD_PID='' PROXY_PID='' D_PID='' MNT=$SC/mnt NS_A='' NS_B='' NET_DAEMON_PID=''
mounted() { grep -qs " $MNT fuse" /proc/mounts; }
umount_nas() {
	local i
	for ((i = 0; i < 50; i++)); do
		mounted || return 0
		if [ "$i" -lt 25 ]; then fusermount -u "$MNT" 2>/dev/null || true
		else fusermount -uz "$MNT" 2>/dev/null || true; fi
		mounted || return 0
		sleep 0.2
	done
	say "$ME: cannot unmount $MNT"
	return 1
}
stop_pid() { # VAR: kill the process whose PID is in VAR, wait, clear VAR
	local v=$1
	if [ -n "${!v}" ]; then
		kill "${!v}" 2>/dev/null || true
		wait "${!v}" 2>/dev/null || true
		printf -v "$v" ''
	fi
}
nas_stop() { umount_nas || true; stop_pid PROXY_PID; stop_pid SSHD_PID; }
cleanup() {
	nas_stop
	stop_pid D_PID
	net_teardown
	rm -rf "$SC/dst" "$SC/served" "$SC/ddst" "$WORK/net-dst" "$WORK/fpsync-tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- trees
# subset_tree NAME N: every k-th file of the $TREE tree (N files, with their
# directories), cached in $SC/trees/NAME.
subset_tree() {
	local name=$1 n=$2 dir=$SC/trees/$1-$TREE
	if [ ! -f "$dir.done" ]; then
		rm -rf "$dir"
		mkdir -p "$dir"
		(cd "$SRC_TREE" && find . -type f | sort) | awk -v n="$n" 'NR==FNR{c++; next} {k=int(c/n); if (k<1) k=1; if ((FNR-1)%k==0 && m<n) {print; m++}}' - <(cd "$SRC_TREE" && find . -type f | sort) >"$dir.list"
		rsync -a --files-from="$dir.list" "$SRC_TREE"/ "$dir"/
		touch "$dir.done"
	fi
	echo "$dir"
}

# ---------------------------------------------------------------- verification
# listing DIR [links]: one line per entry (not the top): path, type, and for
# non-directories size, mtime (s), mode and link target; directories keep type
# and mode only (concurrent rsyncs touch a directory's mtime after its own
# rsync set it). With "links", regular files also give how many paths of the
# tree share their inode, so a hard link split into two files differs. That is
# counted within the tree, not the inode's link count: a link from outside it
# (perf's ~/.debug cache links the binaries it profiled) is no tool's to copy.
listing() {
	(cd "$1" && find . -mindepth 1 -printf '%P\t%y\t%s\t%Ts\t%m\t%i\t%l\n') |
		awk -F'\t' -v L="${2:-}" 'BEGIN{OFS="\t"}
			{ p[NR]=$1; y[NR]=$2; s[NR]=$3; t[NR]=$4; m[NR]=$5; ino[NR]=$6; l[NR]=$7; if ($2=="f") n[$6]++ }
			END { for (i = 1; i <= NR; i++) {
				if (y[i]=="d") { print p[i],"d","","",m[i],"",""; continue }
				print p[i],y[i],s[i],t[i],m[i],(L=="links" && y[i]=="f") ? n[ino[i]] : "",l[i] } }' | sort
}
# ref_setup KEY SRC [links]: the source's listing and checksums of a sample
# (every k-th regular file, SAMPLE_N of them, plus the files in $OUT/ref/KEY.extra).
ref_setup() {
	local key=$1 src=$2 r=$OUT/ref/$1
	listing "$src" "${3:-}" >"$r.list"
	awk -F'\t' '$2=="f"{print $1}' "$r.list" >"$r.files"
	awk -v n="$SAMPLE_N" 'NR==FNR{c++; next} {k=int(c/n); if (k<1) k=1; if ((FNR-1)%k==0) print}' "$r.files" "$r.files" >"$r.sample"
	[ ! -f "$r.extra" ] || cat "$r.extra" >>"$r.sample"
	(cd "$src" && sort -u "$r.sample" | tr '\n' '\0' | xargs -0 -r sha256sum) >"$r.sha"
}
# check KEY DIR [links] -> ok, or FAIL: reason
check() {
	local key=$1 dir=$2 r=$OUT/ref/$1 n
	[ -d "$dir" ] || { echo "FAIL: no $dir"; return; }
	listing "$dir" "${3:-}" >"$r.got"
	if ! cmp -s "$r.list" "$r.got"; then
		n=$(diff "$r.list" "$r.got" | grep -c '^[<>]' || true)
		diff "$r.list" "$r.got" | head -n 20 >"$OUT/logs/$key-$TAG.diff" || true
		echo "FAIL: $n listing lines differ (logs/$key-$TAG.diff)"
		return
	fi
	(cd "$dir" && sha256sum --quiet -c "$r.sha" >/dev/null 2>&1) || { echo "FAIL: checksum"; return; }
	echo ok
}

# ---------------------------------------------------------------- methods
# Run by `measure -- [netns] bash -c m_TOOL` with SRC (a local directory),
# DEST (a directory or an rsync:// URL), URL (scenario 7: the source), C, J,
# RX (extra rsync options: -H in scenario 4), PRLOG and FPTMP.
m_rsync() {
	# shellcheck disable=SC2086
	if [ -n "${URL:-}" ]; then rsync -a $RX "$URL"/ "$DEST"/; else rsync -a $RX "$SRC"/ "$DEST"/; fi
}
m_rsync_list() {
	# One rsync fed the whole list, as a tool that hands rsync lists runs it with one
	# job: the floor of the list's own cost (rsync reads --files-from a byte per read(2)
	# in a push, and a pull matches each name against implied include rules).
	local from=.
	[ -z "${URL:-}" ] || from=$URL/
	# shellcheck disable=SC2086
	cd "$SRC" && find . -xdev -print0 | rsync -a $RX --from0 --files-from=- "$from" "$DEST"/
}
m_prsync() {
	local -a a=()
	[ -z "${URL:-}" ] || a+=(--root "$URL")
	[ -z "$C" ] || a+=(--chunk-files "$C" -j "$J")
	[ -z "${AUTO:-}" ] || a+=(-j auto)
	local rx=${RX:-}
	[ -z "${TRUST:-}" ] || rx="$rx --trust-sender"
	# shellcheck disable=SC2086
	cd "$SRC" && find . -xdev -print0 | "${PRSYNC_RUN:-$PRSYNC}" -0 $PRSYNC_OPTS "${a[@]}" "$DEST"/ ${rx:+-- $rx} >"$PRLOG"
}
m_parallel() {
	local from=.
	[ -z "${URL:-}" ] || from=$URL/
	# shellcheck disable=SC2086
	cd "$SRC" && find . -xdev -print0 |
		parallel --will-cite -0 --pipe --recend '\0' -N "$C" -j "$J" rsync -a $RX --from0 --files-from=- "$from" "$DEST"/
}
m_fpsync() {
	# fpsync's own rsync options, plus RX.
	fpsync -n "$J" -f "$C" -t "$FPTMP" -o "-lptgoD -v --numeric-ids${RX:+ $RX}" "$SRC"/ "$DEST"/
}
export -f m_rsync m_rsync_list m_prsync m_parallel m_fpsync
export PRSYNC PRSYNC_OPTS

# methods_of SCENARIO: the method names, tool[-cC-jJ].
methods_of() {
	local t c j
	for t in $TOOLS; do
		case "$t" in
		rsync | rsync-list | prsync-default | prsync-auto) echo "$t" ;;
		prsync-trust) if [ "$1" = 7 ] || [ "$1" = 10 ]; then echo "$t"; fi ;;
		prsync-base) [ -n "$PRSYNC_BASE" ] || die "prsync-base needs --prsync-base PATH"; echo "$t" ;;
		prsync | parallel | fpsync)
			if [ "$t" = fpsync ] && { [ "$1" = 7 ] || [ "$1" = 10 ]; }; then continue; fi
			if [ "$t" = parallel ] && ! have parallel; then continue; fi
			if [ "$t" = fpsync ] && ! have fpsync; then continue; fi
			local js=$JOBS cs=$CHUNKS v
			v=BENCH_JOBS_S$1 && js=${!v:-$js}
			v=BENCH_CHUNKS_S$1 && cs=${!v:-$cs}
			# The daemon takes DAEMON_MAXCONN sessions: the peers, which have no
			# way to absorb a refusal, also get that many jobs.
			# (once: BENCH_JOBS_S9=3 runs them at 3 alone)
			if { [ "$1" = 6 ] || [ "$1" = 9 ]; } && [ "$t" != prsync ]; then
				js=$(printf '%s\n' "$DAEMON_MAXCONN" $js | awk '!seen[$0]++' | tr '\n' ' ')
			fi
			for c in $cs; do for j in $js; do echo "$t-c$c-j$j"; done; done ;;
		*) die "unknown tool $t" ;;
		esac
	done
}

# ---------------------------------------------------------------- scenario plumbing
# Each scenario sets: SRC, DEST (what the method writes to), DSTDIR (the local
# directory to check), WRAP (a command prefix), URL, RX, LINKS and the hooks
# pre_run (DEST to its start state) and post_run (before the check).

nas_setup() { # start sshd and the latency proxy; 1 if they cannot run here
	local t=$SC/ssh i port
	for x in /usr/sbin/sshd sshfs ssh-keygen fusermount; do
		have "$x" || { SKIPPED+=("scenarios 1-2: $x is not installed (apt-get install openssh-server sshfs)"); return 1; }
	done
	[ -e /dev/fuse ] || { SKIPPED+=("scenarios 1-2: no /dev/fuse"); return 1; }
	sshfs --help 2>&1 | grep max_conns >/dev/null || { SKIPPED+=("scenarios 1-2: this sshfs has no -o max_conns (needs sshfs >= 3.7.3)"); return 1; }
	mkdir -p "$MNT"
	private_sshd "$t" 18830 "MaxSessions 100" "Subsystem sftp internal-sftp" || return 1
	port=$SSHD_PORT
	for ((i = 0; i < 50; i++)); do ! port_free "$port" && break; sleep 0.1; done
	rm -f "$t/proxy.addr"
	"$BIN/latproxy" -upstream "127.0.0.1:$port" -latency "$LATENCY" -addr-file "$t/proxy.addr" 2>>"$OUT/logs/latproxy.log" &
	PROXY_PID=$!
	for ((i = 0; i < 50; i++)); do [ -s "$t/proxy.addr" ] && break; sleep 0.1; done
	[ -s "$t/proxy.addr" ] || { SKIPPED+=("scenarios 1-2: the latency proxy did not start (logs/latproxy.log)"); return 1; }
	PROXY_PORT=$(sed 's/.*://' "$t/proxy.addr")
	NAS_DESC="sshd on 127.0.0.1:$port, cmd/latproxy (toxiproxy v2.5.0, latency $LATENCY upstream and downstream) on 127.0.0.1:$PROXY_PORT, sshfs $(sshfs --version 2>&1 | sed -n 's/^SSHFS version //p' | head -n1) -o max_conns=$MAX_CONNS"
	mount_nas || { SKIPPED+=("scenarios 1-2: sshfs could not mount (logs/sshfs.log)"); return 1; }
	umount_nas
}
mount_nas() {
	local t=$SC/ssh
	mkdir -p "$SC/served" "$MNT"
	sshfs -o max_conns="$MAX_CONNS" -o port="$PROXY_PORT" -o IdentityFile="$t/id" \
		-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR \
		"root@127.0.0.1:$SC/served" "$MNT" 2>>"$OUT/logs/sshfs.log" || return 1
	mounted
}

daemon_start() { # MODULE_PATH READONLY MAXCONN
	local conf=$OUT/logs/rsyncd-$S.conf i
	D_PORT=$(free_port 18730) || return 1
	cat >"$conf" <<EOF
pid file = $OUT/logs/rsyncd-$S.pid
lock file = $OUT/logs/rsyncd-$S.lock
use chroot = no
max connections = $3
log file = $OUT/logs/rsyncd-$S.log
${DAEMON_SOCKOPTS:+socket options = $DAEMON_SOCKOPTS}
[bench]
	path = $1
	read only = $2
EOF
	[ "$IS_ROOT" != 1 ] || printf '\tuid = root\n\tgid = root\n' >>"$conf"
	rsync --daemon --no-detach --address=127.0.0.1 --port="$D_PORT" --config="$conf" >>"$OUT/logs/rsyncd-$S.out" 2>&1 &
	D_PID=$!
	for ((i = 0; i < 50; i++)); do
		rsync "rsync://127.0.0.1:$D_PORT/" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}

# large_tree: the whole tree of the $LARGE_TREE profile (scenarios 9 and 10), generated
# once and printed; SRC and META stay the main tree's.
large_tree() {
	local src=$SRC meta=$META
	prepare_tree "$LARGE_TREE" >&2
	echo "$SRC"
	SRC=$src META=$meta
}

# scenario_setup S: 0 when it can run (sets the variables above), 1 to skip.
scenario_setup() {
	S=$1 WRAP=() URL='' RX='' LINKS='' DSTDIR=$SC/dst
	case "$S" in
	1 | 2)
		[ -n "$PROXY_PID" ] || nas_setup || { nas_stop; return 1; }
		DEST=$MNT DSTDIR=$SC/served
		if [ "$S" = 1 ]; then
			SRC=$(subset_tree nas1k "$NAS_FILES")
			NAME="NAS fresh: $NAS_FILES files into sshfs"
		else
			local base
			base=$(subset_tree nas20k "$NAS_BASE")
			SRC=$SC/trees/nas20k-changed-$TREE
			if [ ! -f "$SRC.done" ]; then
				rm -rf "$SRC"
				cp -a "$base" "$SRC"
				# 1,000 of 20,000 files modified (new content, new mtime): 5 %.
				"$GENTREE" -mutate "$SRC" -manifest "$SRC.manifest" -seed "$SEED" -delete-pct 0 -delete-dirs 0 \
					-add-pct 0 -add-dirs 0 -modify-pct "$(awk -v a="$NAS_CHANGED" -v b="$NAS_BASE" 'BEGIN{print 100*a/b}')" >/dev/null
				touch "$SRC.done"
			fi
			NAS_BASE_DIR=$base
			NAME="NAS incremental: $NAS_BASE files in DEST, $NAS_CHANGED changed"
		fi ;;
	3) SRC=$SRC_TREE DEST=$SC/dst NAME="local: the $TREE tree, cold cache" ;;
	4)
		[ -d "$USR_ROOT" ] || { SKIPPED+=("scenario 4: no $USR_ROOT"); return 1; }
		SRC=$USR_ROOT DEST=$SC/dst RX=-H LINKS=links NAME="real tree: $USR_ROOT (-H)" ;;
	5 | 8)
		if [ "$IS_ROOT" != 1 ] || ! have ip || ! have tc; then SKIPPED+=("scenario $S: needs root, ip and tc"); return 1; fi
		if [ "$S" = 5 ]; then SRC=$(subset_tree net5k "$NET_FILES")
		else SRC=$(subset_tree "net$((LARGE_NET_FILES / 1000))k" "$LARGE_NET_FILES"); fi
		NET_MAXCONN=0
		net_setup || { SKIPPED+=("scenario $S: network setup failed"); net_teardown; return 1; }
		DEST=rsync://10.200.0.2/bench DSTDIR=$WORK/net-dst WRAP=(ip netns exec "$NS_A")
		NAME="capped streams: $NET_STREAM per stream, $NET_LINK in all, to a daemon"
		[ "$S" = 5 ] || NAME="$NAME (large: $LARGE_NET_FILES files)" ;;
	6 | 9)
		SRC=$(subset_tree d10k "$DAEMON_FILES")
		[ "$S" = 6 ] || SRC=$(large_tree)
		DSTDIR=$SC/ddst
		mkdir -p "$DSTDIR"
		daemon_start "$DSTDIR" false "$DAEMON_MAXCONN" || { SKIPPED+=("scenario $S: the daemon did not start"); stop_pid D_PID; return 1; }
		DEST=rsync://127.0.0.1:$D_PORT/bench NAME="daemon with max connections = $DAEMON_MAXCONN"
		[ "$S" = 6 ] || NAME="$NAME (large: the $LARGE_TREE profile)" ;;
	7 | 10)
		SRC=$(subset_tree d10k "$DAEMON_FILES")
		[ "$S" = 7 ] || SRC=$(large_tree)
		daemon_start "$SRC" true 0 || { SKIPPED+=("scenario $S: the daemon did not start"); stop_pid D_PID; return 1; }
		URL=rsync://127.0.0.1:$D_PORT/bench DEST=$SC/dst NAME="pull from a daemon"
		[ "$S" = 7 ] || NAME="$NAME (large: the $LARGE_TREE profile)" ;;
	esac
	if [ "$S" = 2 ]; then
		awk '$1=="M"{print $2}' "$SRC.manifest" 2>/dev/null | sed 's|^\./||' >"$OUT/ref/s$S.extra" || true
	fi
	ref_setup "s$S" "$SRC" "$LINKS"
	return 0
}
scenario_teardown() {
	case "$S" in
	1 | 2) umount_nas || true ;;
	5 | 8) net_teardown ;;
	6 | 7 | 9 | 10) stop_pid D_PID ;;
	esac
	rm -rf "$SC/dst" "$SC/ddst" "$WORK/net-dst"
}
pre_run() {
	case "$S" in
	1 | 2)
		umount_nas
		if [ "$S" = 1 ]; then rm -rf "$SC/served"; mkdir -p "$SC/served"
		else rsync -a --delete "$NAS_BASE_DIR"/ "$SC/served"/; fi ;;
	5 | 8) rm -rf "$WORK/net-dst" && mkdir -p "$WORK/net-dst" ;;
	6 | 9) find "$SC/ddst" -mindepth 1 -delete ;;
	*) rm -rf "$SC/dst" && mkdir -p "$SC/dst" ;;
	esac
	rm -rf "$WORK/fpsync-tmp"
	drop_caches
	# Mount afresh for each run: no attribute or directory cache carries over.
	case "$S" in 1 | 2) mount_nas || return 1 ;; esac
	return 0
}
post_run() { case "$S" in 1 | 2) umount_nas ;; esac; rm -rf "$WORK/fpsync-tmp"; }

# run_one METHOD REP
run_one() {
	local m=$1 rep=$2 tool c='' j='' res v wall user sys rss code auto run trust
	TAG="s$S-$m-$rep"
	res=$OUT/logs/$TAG.time
	tool=${m%%-c*}
	if [[ "$m" =~ -c([0-9]+)-j([0-9]+)$ ]]; then c=${BASH_REMATCH[1]} j=${BASH_REMATCH[2]}; fi
	local fn=m_$tool
	rm -f "$OUT/logs/$TAG.jsonl"
	[ "$tool" != prsync-default ] || fn=m_prsync
	[ "$tool" != rsync-list ] || fn=m_rsync_list
	auto='' run=''
	trust=''
	if [ "$tool" = prsync-auto ]; then fn=m_prsync auto=1; fi
	if [ "$tool" = prsync-trust ]; then fn=m_prsync trust=1; fi
	if [ "$tool" = prsync-base ]; then fn=m_prsync run=$PRSYNC_BASE; fi
	export SRC DEST URL RX C=$c J=$j AUTO=$auto TRUST=$trust PRSYNC_RUN=$run PRLOG=$OUT/logs/$TAG.jsonl FPTMP=$WORK/fpsync-tmp
	if ! pre_run; then
		v="FAIL: setup" code=-1 wall=0 user=0 sys=0 rss=0
	else
		# timeout runs the method in a process group of its own and ends the
		# whole group (rsyncs included) after RUN_TIMEOUT seconds.
		"$MEASURE" -o "$res" -- timeout -k 10 "$RUN_TIMEOUT" "${WRAP[@]}" bash -c "$fn" >"$OUT/logs/$TAG.out" 2>"$OUT/logs/$TAG.err" || true
		read -r wall user sys rss code <"$res" || { wall=0 user=0 sys=0 rss=0 code=127; }
		post_run || true
		if [ "$code" = 124 ] || [ "$code" = 137 ]; then v="FAIL: timeout after $RUN_TIMEOUT s"
		else v=$(check "s$S" "$DSTDIR" "$LINKS"); fi
	fi
	if [ "$code" != 0 ] || [ "$v" != ok ]; then
		FAILURES=$((FAILURES + 1))
		say "   !! $TAG: exit $code, check: $v (logs/$TAG.err)"
	fi
	# From prsync's summary: its chunks, the seconds its CPU throttle held rsyncs
	# suspended (the machine's other load counts), and its retries.
	local chunks='' susp='' retries=''
	if [ -s "$PRLOG" ] && grep -q '"type": *"summary"' "$PRLOG"; then
		read -r chunks susp retries < <(grep '"type": *"summary"' "$PRLOG" | tail -n1 |
			sed -E 's/.*"chunks": *([0-9]+).*"retries": *([0-9]+).*"seconds_suspended": *([0-9.]+).*/\1 \3 \2/') || true
	fi
	echo "$S,${NAME//,/;},$m,$tool,$c,$j,$rep,$wall,$user,$sys,$rss,$code,${v//,/;},$chunks,$susp,$retries" >>"$RESULTS"
	say "$(printf '   [s%s %d] %-22s %8.2f s  cpu %6.2f s  %s' "$S" "$rep" "$m" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" "$v")"
}

# ---------------------------------------------------------------- main
say "== results in $OUT, trees and destinations in $WORK"
prepare_tree "$TREE"
SRC_TREE=$SRC
for s in $SCENARIOS; do
	if ! scenario_setup "$s"; then
		say "$ME: skipping scenario $s: ${SKIPPED[-1]:-}"
		continue
	fi
	mapfile -t MS < <(methods_of "$s")
	n=${#MS[@]}
	say "== scenario $S ($NAME): $(grep -c . "$OUT/ref/s$S.files") files, $REPS rep(s), ${#MS[@]} methods"
	for ((rep = 1; rep <= REPS; rep++)); do
		# Rotate the order each repetition so no method always runs first.
		for ((i = 0; i < n; i++)); do run_one "${MS[$(((i + rep - 1) % n))]}" "$rep"; done
	done
	scenario_teardown
done
nas_stop

ELAPSED=$(($(date +%s) - T0))
{
	machine_info "subsets of the $TREE profile, seed $SEED (see the scenarios)"
	echo "nproc: $(nproc)"
	echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
	[ -z "${NAS_DESC:-}" ] || echo "nas: $NAS_DESC"
	echo "net: $NET_STREAM per stream, $NET_LINK in all (tc htb, scenarios 5 and 8)"
	echo "daemon max connections: $DAEMON_MAXCONN (scenario 6)"
	echo "daemon socket options: ${DAEMON_SOCKOPTS:-none} (scenarios 5 to 7)"
	echo "repetitions: $REPS"
	echo "sweep: chunks {${CHUNKS// /, }} x jobs {${JOBS// /, }}"
	for s in $SCENARIOS; do
		v=BENCH_CHUNKS_S$s w=BENCH_JOBS_S$s
		[ -z "${!v:-}${!w:-}" ] || echo "sweep of scenario $s: chunks {$(echo ${!v:-$CHUNKS} | sed 's/ /, /g')} x jobs {$(echo ${!w:-$JOBS} | sed 's/ /, /g')}"
	done
	[ -z "$PRSYNC_OPTS" ] || echo "extra prsync flags: $PRSYNC_OPTS"
	echo "wall time of the run: $ELAPSED s"
	[ -z "$LABEL" ] || echo "label: $LABEL"
	for s in "${SKIPPED[@]}"; do echo "skipped: $s"; done
} >"$OUT/machine.txt"
"$BIN/scenreport" -in "$RESULTS" -machine "$OUT/machine.txt" -md "$OUT/RESULTS.md" -summary "$OUT/summary.csv"
if [ "$SMOKE" != 1 ]; then
	pl=$(for s in 1 3 5 8; do case " $SCENARIOS " in *" $s "*) printf '%s,' "$s" ;; esac; done)
	[ -z "$pl" ] || "$BIN/plotchunks" -logs "$OUT/logs" -scenarios "${pl%,}" -out "$OUT/chunks" || say "$ME: the plot failed"
fi
if [ "$PUBLISH" = 1 ]; then
	cp "$RESULTS" "$BENCH_DIR/results-scenarios.csv"
	cp "$OUT/machine.txt" "$BENCH_DIR/results-scenarios-machine.txt"
	for f in "$OUT"/chunks-*.png; do [ ! -f "$f" ] || cp "$f" "$BENCH_DIR/plots/scenarios-${f##*/}"; done
	"$BIN/scenreport" -in "$RESULTS" -machine "$OUT/machine.txt" -splice "$BENCH_DIR/RESULTS.md" -plots plots/scenarios-chunks
	say "== wrote bench/results-scenarios.csv and the scenarios section of bench/RESULTS.md"
fi
say "== done in $ELAPSED s: $OUT"
if [ "$FAILURES" -gt 0 ]; then
	say "$ME: $FAILURES run(s) failed or did not verify"
	[ "$SMOKE" != 1 ] || exit 1
fi
exit 0
