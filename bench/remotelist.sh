#!/usr/bin/env bash
# bench/remotelist.sh: what a push's lists cost, read by the client or held on the far side
# (issue 45 item 4, --remote-lists; README "How lists travel").
#
# In a push the client rsync is the sender and reads a local --files-from one byte per
# read(2), each after a poll(2); with --files-from=:NAME the far side reads NAME and sends
# it in blocks. This script copies subsets of the "many" tree (200,000 files of 128 B to
# 16 KiB; the subsets keep its Cassandra-like paths) to a daemon on 127.0.0.1 and over
# ssh to 127.0.0.1, each method in turn, DEST emptied before each run:
#
#   rsync         rsync -a SRC/ DEST/                     (no list at all)
#   list-client   one rsync, the whole list on stdin      (the client reads it)
#   list-remote   one upload of the list, then one rsync --files-from=:NAME
#   prsync-off    prsync --remote-lists off               (each rsync reads its list on stdin)
#   prsync-auto   prsync --remote-lists auto              (the default)
#   prsync-on     prsync --remote-lists on                (every chunk's list on the far side)
#
# Every prsync runs with --no-throttle (the machine is shared: a pause is not the list's
# cost). Wall and client CPU come from bench/cmd/measure (children included: the rsyncs,
# ssh); the far side's CPU is what the daemon or sshd reaped meanwhile (/proc/PID/stat's
# cutime and cstime), read 0.5 s after the run. Every copy is checked: the same names and
# sizes as the source, nothing else (no list left behind).
#
#   bench/remotelist.sh                       # 5 reps, 5,000 and 10,000 files, daemon and ssh
#   bench/remotelist.sh --reps 3 --files 5000 --targets daemon
set -euo pipefail
export LC_ALL=C

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$BENCH_DIR/.." && pwd -P)
ME=remotelist.sh
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"

REPS=${BENCH_REPS:-5}
FILES=${BENCH_FILES:-"5000 10000"}
TARGETS=${BENCH_TARGETS:-"daemon ssh"}
METHODS=${BENCH_METHODS:-"rsync list-client list-remote prsync-off prsync-auto prsync-on"}
SEED=${BENCH_SEED:-1}
WORK=${BENCH_WORK:-/var/tmp/prsync-bench}
OUT=${BENCH_OUT:-}
PRSYNC=${PRSYNC:-}
PRSYNC_OPTS=${BENCH_PRSYNC_OPTS:-}
SAMPLE_N=50 PERFILE_N=500

usage() {
	cat <<EOF
usage: bench/remotelist.sh [options]

  --reps N          repetitions, interleaved; medians of N (default 5)   [BENCH_REPS]
  --files LIST      subset sizes of the many tree (default "5000 10000") [BENCH_FILES]
  --targets LIST    daemon, ssh (default both; ssh needs root and sshd)  [BENCH_TARGETS]
  --methods LIST    of: $METHODS                                          [BENCH_METHODS]
  --prsync-opts STR extra flags for every prsync                          [BENCH_PRSYNC_OPTS]
  --out DIR         results (default /tmp/prsync-bench/remotelist-DATE)   [BENCH_OUT]
  --work DIR        trees (shared with the other scripts) and DEST        [BENCH_WORK]
  --prsync PATH     prsync binary (default: built from the repo)          [PRSYNC]
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--reps) REPS=$2; shift ;;
	--files) FILES=$2; shift ;;
	--targets) TARGETS=$2; shift ;;
	--methods) METHODS=$2; shift ;;
	--prsync-opts) PRSYNC_OPTS=$2; shift ;;
	--out) OUT=$2; shift ;;
	--work) WORK=$2; shift ;;
	--prsync) PRSYNC=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done
case "$REPS" in '' | *[!0-9]* | 0) die "--reps must be a positive integer" ;; esac
for t in $TARGETS; do case "$t" in daemon | ssh) ;; *) die "unknown target $t" ;; esac; done
have rsync || die "needs rsync"
IS_ROOT=0
[ "$(id -u)" != 0 ] || IS_ROOT=1

OUT=${OUT:-/tmp/prsync-bench/remotelist-$(date +%Y%m%d-%H%M%S)}
OUT=$(realpath -m "$OUT")
WORK=$(realpath -m "$WORK")
case "$OUT/" in "$REPO"/*) die "--out must be outside the repository" ;; esac
mkdir -p "$OUT/logs" "$WORK"
SC=$WORK/remotelist
BIN=$OUT/bin
bench_build_tools "$BIN" "$OUT/logs" gentree measure
[ -n "$PRSYNC" ] || die "no prsync binary (see $OUT/logs/prsync-build.err)"

D_PID='' SSHD_PID=''
cleanup() {
	local p
	for p in "$D_PID" "$SSHD_PID"; do
		[ -z "$p" ] || { kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; }
	done
	rm -rf "$SC/dst" "$SC/ssh" # the trees stay: a cache, as the other scripts keep theirs
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- the trees
# listing_of DIR: name, type and (files) size of every entry below DIR, sorted
listing_of() {
	(cd "$1" && find . -mindepth 1 -printf '%P\t%y\t%s\n') | awk -F'\t' -v OFS='\t' '$2=="d"{$3=""} 1' | sort
}
prepare_tree many
TREE_SRC=$SRC
# subset N: every k-th file of the many tree (N files), cached in $SC/trees/N
subset() {
	local n=$1 dir=$SC/trees/many-$1
	if [ ! -f "$dir.done" ]; then
		rm -rf "$dir"
		mkdir -p "$dir"
		(cd "$TREE_SRC" && find . -type f | sort) >"$dir.all"
		awk -v n="$n" 'NR==FNR{c++; next} {k=int(c/n); if (k<1) k=1; if ((FNR-1)%k==0 && m<n) {print; m++}}' "$dir.all" "$dir.all" >"$dir.list"
		rsync -a --files-from="$dir.list" "$TREE_SRC"/ "$dir"/
		listing_of "$dir" >"$dir.listing"
		touch "$dir.done"
	fi
	echo "$dir"
}

# ---------------------------------------------------------------- the far sides
DST=$SC/dst
mkdir -p "$DST"
start_daemon() {
	local conf=$OUT/logs/rsyncd.conf i uid=''
	D_PORT=$(free_port 18930) || die "no free port"
	[ "$IS_ROOT" != 1 ] || uid=$'uid = root\ngid = root'
	cat >"$conf" <<EOF
pid file = $OUT/logs/rsyncd.pid
lock file = $OUT/logs/rsyncd.lock
log file = $OUT/logs/rsyncd.log
use chroot = no
[bench]
path = $DST
read only = no
$uid
EOF
	rsync --daemon --no-detach --address=127.0.0.1 --port="$D_PORT" --config="$conf" >>"$OUT/logs/rsyncd.out" 2>&1 &
	D_PID=$!
	for ((i = 0; i < 50; i++)); do
		rsync "rsync://127.0.0.1:$D_PORT/" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	die "the daemon did not start (logs/rsyncd.out)"
}
start_sshd() {
	local t=$SC/ssh i port
	[ "$IS_ROOT" = 1 ] && have /usr/sbin/sshd && have ssh-keygen || return 1
	private_sshd "$t" 18960 || return 1
	port=$SSHD_PORT
	cat >"$t/ssh_config" <<EOF
Host bench
  HostName 127.0.0.1
  Port $port
  User root
  IdentityFile $t/id
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  BatchMode yes
  LogLevel ERROR
EOF
	for ((i = 0; i < 50; i++)); do
		ssh -F "$t/ssh_config" bench true 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# ---------------------------------------------------------------- the methods
# Run by measure in $SRC with DEST, FARCPU_PID, LIST (the whole list, NUL-separated) and
# RX (the client's options: -e for ssh, TCP_NODELAY for the daemon, as prsync adds).
m_rsync() { rsync -a $RX ./ "$DEST"/; }
m_list_client() { rsync -a $RX --from0 --files-from="$LIST" . "$DEST"/; }
m_list_remote() {
	# the list's upload is part of the cost: one session
	rsync -r $RX "$UPDIR"/ "$DEST"/.prsync-lists/ &&
		rsync -a $RX --from0 --files-from=":$LISTPATH" . "$DEST"/
}
m_prsync() {
	# shellcheck disable=SC2086
	find . -print0 | "$PRSYNC" -0 --no-throttle --remote-lists "$MODE" $PRSYNC_OPTS "$DEST"/ ${RX:+-- $RX} >"$PRLOG"
}
export -f m_rsync m_list_client m_list_remote m_prsync
export PRSYNC PRSYNC_OPTS

far_cpu() { # the far side's CPU so far: what its master process reaped
	if [ "$TARGET" = daemon ]; then proc_cpu "$D_PID"; else proc_cpu "$SSHD_PID"; fi
}

RAW=$OUT/raw.csv
echo "target,files,method,rep,wall_s,client_cpu_s,far_cpu_s,exit,check,load1,uploads,upload_s,remote_rsyncs,chunks" >"$RAW"

run_one() { # TARGET N METHOD REP
	local target=$1 n=$2 m=$3 rep=$4 src f0 f1 res wall user sys code chk load up ups rem chunks
	src=$(subset "$n")
	find "$DST" -mindepth 1 -delete
	sync
	export PRLOG=$OUT/logs/$target-$n-$m-$rep.json DEST RX LIST UPDIR LISTPATH MODE=''
	LIST=$SC/trees/many-$n.list0
	UPDIR=$SC/trees/many-$n.up LISTPATH=.prsync-lists/list
	case "$target" in
	daemon) DEST=rsync://127.0.0.1:$D_PORT/bench RX=--sockopts=TCP_NODELAY ;;
	ssh) DEST=bench:$DST RX='' LISTPATH=$DST/.prsync-lists/list ;; # ssh -F: RSYNC_RSH
	esac
	local fn
	case "$m" in
	rsync) fn=m_rsync ;;
	list-client) fn=m_list_client ;;
	list-remote) fn=m_list_remote ;;
	prsync-*) fn=m_prsync MODE=${m#prsync-} ;;
	*) die "unknown method $m" ;;
	esac
	export MODE
	load=$(cut -d' ' -f1 /proc/loadavg)
	f0=$(far_cpu)
	res=$(cd "$src" && "$MEASURE" -- bash -c "$fn" 2>>"$OUT/logs/$target-$n-$m-$rep.err")
	sleep 0.5
	f1=$(far_cpu)
	read -r wall user sys _ code <<<"$res"
	if [ "$code" = 0 ]; then
		chk=ok
		cmp -s "$SC/trees/many-$n.listing" <(listing_of "$DST" | grep -v '^\.prsync-lists') ||
			chk="FAIL: the copy differs"
		# list-remote leaves its list; prsync must leave none
		[ "$m" = list-remote ] || ! [ -e "$DST/.prsync-lists" ] || chk="FAIL: .prsync-lists left"
	else
		chk="FAIL: exit $code"
	fi
	up='' ups='' rem='' chunks=''
	if [ "${m#prsync-}" != "$m" ] && [ -s "$PRLOG" ]; then
		read -r up ups rem chunks < <(grep '"type":"summary"' "$PRLOG" | tail -n1 |
			jq -r '[(.remote_lists.uploads // 0), (.remote_lists.upload_seconds // 0), (.remote_lists.rsyncs // 0), .chunks] | @tsv') || true
	fi
	printf '%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n' "$target" "$n" "$m" "$rep" "$wall" \
		"$(awk -v u="$user" -v s="$sys" 'BEGIN{printf "%.3f", u+s}')" "$(awk -v a="$f0" -v b="$f1" 'BEGIN{printf "%.3f", b-a}')" \
		"$code" "$chk" "$load" "$up" "$ups" "$rem" "$chunks" >>"$RAW"
	say "$(printf '  [%s %5s %d] %-12s %6.2f s  client %5.2f  far %5.2f  %s' "$target" "$n" "$rep" "$m" "$wall" \
		"$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" "$(awk -v a="$f0" -v b="$f1" 'BEGIN{print b-a}')" "$chk")"
}

have jq || die "needs jq"
for n in $FILES; do
	s=$(subset "$n")
	(cd "$s" && find . -mindepth 1 -print0) >"$SC/trees/many-$n.list0"
	rm -rf "$SC/trees/many-$n.up" && mkdir -p "$SC/trees/many-$n.up"
	cp "$SC/trees/many-$n.list0" "$SC/trees/many-$n.up/list"
done
ACTIVE='' CAN_DROP=0 # warm cache: the list's cost, not the disk's, is what is measured
for t in $TARGETS; do
	case "$t" in
	daemon) start_daemon && ACTIVE+=" daemon" ;;
	ssh)
		if start_sshd; then
			ACTIVE+=" ssh"
			export RSYNC_RSH="ssh -F $SC/ssh/ssh_config"
		else
			say "$ME: ssh skipped (needs root, sshd and ssh-keygen)"
		fi ;;
	esac
done
{
	machine_info "subsets of the many tree (200,000 files of 128 B to 16 KiB), seed $SEED" |
		sed 's/^page cache: .*/page cache: warm, not dropped (the lists are measured, not the disk)/' 
	echo "targets:$ACTIVE (a daemon on 127.0.0.1 without socket options; sshd on 127.0.0.1, ed25519)"
	echo "prsync flags: --no-throttle $PRSYNC_OPTS"
} >"$OUT/machine.txt"
for ((rep = 1; rep <= REPS; rep++)); do
	for t in $ACTIVE; do
		TARGET=$t
		for n in $FILES; do
			for m in $METHODS; do run_one "$t" "$n" "$m" "$rep"; done
		done
	done
done

# medians per target, files and method
{
	echo "| far side | files | method | wall (median, min–max) | client CPU | far side's CPU | total CPU | uploads | checks |"
	echo "|---|---:|---|---|---:|---:|---:|---:|---|"
	awk -F, 'NR>1 {k=$1","$2","$3; w[k]=w[k]" "$5; c[k]=c[k]" "$6; f[k]=f[k]" "$7; t[k]=t[k]" "($6+$7); u[k]=u[k]" "$11; if ($9!="ok") bad[k]++; n[k]++; if (!(k in seen)) {seen[k]=1; order[++o]=k}}
		function med(s,   a, m, i, j, x) { m=split(s, a, " "); for (i=2; i<=m; i++) { x=a[i]; for (j=i-1; j>=1 && a[j]>x; j--) a[j+1]=a[j]; a[j+1]=x }
			return (m%2) ? a[(m+1)/2] : (a[m/2]+a[m/2+1])/2 }
		function lo(s,   a, m, i, x) { m=split(s, a, " "); x=a[1]; for (i=2; i<=m; i++) if (a[i]+0<x+0) x=a[i]; return x }
		function hi(s,   a, m, i, x) { m=split(s, a, " "); x=a[1]; for (i=2; i<=m; i++) if (a[i]+0>x+0) x=a[i]; return x }
		END { for (i=1; i<=o; i++) { k=order[i]; split(k, p, ",")
			printf "| %s | %s | %s | %.2f s (%.2f–%.2f) | %.2f | %.2f | %.2f | %s | %d/%d ok |\n", p[1], p[2], p[3], med(w[k]), lo(w[k]), hi(w[k]), med(c[k]), med(f[k]), med(t[k]), (p[3] ~ /^prsync/ || p[3]=="list-remote") ? (p[3]=="list-remote" ? "1" : med(u[k])) : "", n[k]-bad[k], n[k] } }' "$RAW"
} >"$OUT/table.md"
cat "$OUT/table.md"
say "== results in $OUT (raw.csv, table.md, machine.txt, logs/)"
