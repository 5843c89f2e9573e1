# bench/lib.sh: shared by the bench scripts (sourced, not run).
#
# The caller sets, before using these functions:
#   ME          name for messages (run.sh, migrate.sh, ...)
#   WORK SEED   work directory and tree seed
#   GENTREE     the gentree binary (see bench_build_tools)
#   SAMPLE_N PERFILE_N   checksum sample and per-file subset sizes
#   DROP IS_ROOT         for bench_drop_setup
# Trees are cached under $WORK/trees in the same layout by every script, so
# run.sh, migrate.sh and pull.sh share a generated tree.

say() { printf '%s\n' "$*" >&2; }
die() { say "${ME:-bench}: $*"; exit 1; }
have() { command -v "$1" >/dev/null; }

# port_free PORT: nothing listens on TCP PORT here. free_port FROM: the first free port of
# FROM to FROM+199, on stdout.
port_free() { [ -z "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }
free_port() {
	local p
	for ((p = $1; p < $1 + 200; p++)); do
		if port_free "$p"; then echo "$p"; return 0; fi
	done
	return 1
}

# private_sshd DIR FROM [CONFIG_LINE...]: a private sshd on 127.0.0.1 (root logs in with a
# key made for it), its host and client keys and config in DIR (made afresh), at the first
# free port from FROM, with CONFIG_LINEs added to its config; it logs to $OUT/logs/sshd.log.
# Sets SSHD_PID (to stop it by) and SSHD_PORT; the client key is DIR/id. Needs root.
private_sshd() {
	local t=$1 from=$2 line
	shift 2
	rm -rf "$t"
	mkdir -p "$t"
	chmod 700 "$t"
	ssh-keygen -q -t ed25519 -N '' -f "$t/host" && ssh-keygen -q -t ed25519 -N '' -f "$t/id" || return 1
	cp "$t/id.pub" "$t/authorized_keys"
	SSHD_PORT=$(free_port "$from") || return 1
	cat >"$t/sshd_config" <<EOF
Port $SSHD_PORT
ListenAddress 127.0.0.1
HostKey $t/host
PidFile $t/sshd.pid
AuthorizedKeysFile $t/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 100:30:200
LogLevel ERROR
EOF
	for line in "$@"; do printf '%s\n' "$line" >>"$t/sshd_config"; done
	[ "$(id -u)" != 0 ] || mkdir -p /run/sshd # its privilege-separation directory
	/usr/sbin/sshd -D -e -f "$t/sshd_config" 2>>"$OUT/logs/sshd.log" &
	SSHD_PID=$!
}

# bench_build_tools BIN TOOL...: go build bench/cmd/TOOL into BIN; sets MEASURE
# and GENTREE. Then, unless PRSYNC is set, builds prsync from the repository
# (PRSYNC is empty when that fails; the log is in $2/prsync-build.err).
bench_build_tools() {
	local bin=$1 logdir=$2 t
	shift 2
	local -a pkgs=()
	for t in "$@"; do pkgs+=("./cmd/$t"); done
	mkdir -p "$bin"
	say "== building bench tools"
	(cd "$BENCH_DIR" && go build -o "$bin/" "${pkgs[@]}") || die "go build of the bench tools failed"
	MEASURE=$bin/measure
	GENTREE=$bin/gentree
	if [ -z "${PRSYNC:-}" ]; then
		if (cd "$REPO" && go build -buildvcs=auto -o "$bin/prsync" . 2>"$logdir/prsync-build.err"); then
			PRSYNC=$bin/prsync
		else
			say "$ME: cannot build prsync from $REPO (see $logdir/prsync-build.err)"
			PRSYNC=
		fi
	fi
	[ -z "$PRSYNC" ] || PRSYNC=$(command -v "$PRSYNC") || die "prsync binary $PRSYNC not found"
}

# ---------------------------------------------------------------- page cache
# bench_drop_setup: sets CAN_DROP=1 when the page cache can be dropped.
bench_drop_setup() {
	CAN_DROP=0
	if [ "$DROP" != 0 ]; then
		if [ "$IS_ROOT" = 1 ] && [ -w /proc/sys/vm/drop_caches ] && sync && (echo 3 >/proc/sys/vm/drop_caches) 2>/dev/null; then
			CAN_DROP=1
		else
			say "$ME: cannot drop the page cache (needs root and a writable /proc/sys/vm/drop_caches); runs start with a warm cache"
		fi
	fi
}
drop_caches() {
	sync
	if [ "$CAN_DROP" = 1 ]; then echo 3 >/proc/sys/vm/drop_caches; fi
}

# ---------------------------------------------------------------- trees
# prepare_tree PROFILE: generate once (cached by profile, seed and generator
# version), then compute the expected counts, a checksum sample and the
# per-file subset. Sets SRC, SRC_FILES, SRC_DIRS, SRC_BYTES, META.
prepare_tree() {
	local prof=$1 ver name
	ver=$("$GENTREE" -version)
	name="$prof-s$SEED-v$ver"
	SRC=$WORK/trees/$name
	META=$WORK/trees/$name.meta
	if [ ! -f "$META/done" ]; then
		rm -rf "$SRC" "$META"
		mkdir -p "$WORK/trees" "$META"
		say "== generating tree $name"
		"$GENTREE" -profile "$prof" -seed "$SEED" -out "$SRC" >"$META/gentree.txt" || die "gentree failed"
		cat "$META/gentree.txt" >&2
		tree_meta "$SRC" "$META"
		touch "$META/done"
	fi
	read -r SRC_FILES SRC_DIRS SRC_BYTES <"$META/stats"
	read -r SUB_FILES SUB_BYTES <"$META/subset.stats"
	export SRC META
}

# tree_meta DIR META: the expected counts, the checksum sample and the per-file
# subset of DIR, written into META.
tree_meta() {
	local dir=$1 meta=$2
	(cd "$dir" && find . -printf '%y %s\n') | awk '$1=="f"{f++; b+=$2} $1=="d"{d++} END{printf "%d %d %.0f\n", f, d, b}' >"$meta/stats"
	# ~SAMPLE_N files spread over the sorted list, plus the largest one.
	(cd "$dir" && find . -type f -printf '%s %p\n') | sort -k2 >"$meta/files"
	awk -v n="$SAMPLE_N" 'NR==FNR{c++; next} {if ((FNR-1) % int(c/n > 1 ? c/n : 1) == 0) print $2}' "$meta/files" "$meta/files" >"$meta/sample.list"
	sort -n "$meta/files" | tail -n 1 | cut -d' ' -f2- >>"$meta/sample.list"
	(cd "$dir" && sort -u "$meta/sample.list" | tr '\n' '\0' | xargs -0 sha256sum) >"$meta/sample.sha256"
	awk -v n="$PERFILE_N" 'NR==FNR{c++; next} {if ((FNR-1) % int(c/n > 1 ? c/n : 1) == 0 && k < n) {print $2; k++}}' "$meta/files" "$meta/files" >"$meta/subset.list"
	tr '\n' '\0' <"$meta/subset.list" >"$meta/subset.list0"
	(cd "$dir" && xargs -0 sha256sum <"$meta/subset.list0") >"$meta/subset.sha256"
	(cd "$dir" && xargs -0 stat -c %s <"$meta/subset.list0") | awk '{b+=$1} END{printf "%d %.0f\n", NR, b}' >"$meta/subset.stats"
}

tree_stats() { # DIR -> "files dirs bytes"
	find "$1" -printf '%y %s\n' | awk '$1=="f"{f++; b+=$2} $1=="d"{d++} END{printf "%d %d %.0f\n", f, d, b}'
}

# verify DIR [full|subset|files] -> prints ok or FAIL: reason
#   full    counts of files and directories, bytes, the checksum sample
#   files   the same without the directory count (for lists of files only,
#           which leave the tree's empty directories out)
#   subset  the per-file subset only
verify() {
	local dir=$1 mode=${2:-full} f d b want
	read -r f d b < <(tree_stats "$dir")
	if [ "$mode" = subset ]; then
		if [ "$f" != "$SUB_FILES" ] || [ "$b" != "$SUB_BYTES" ]; then
			echo "FAIL: $f files $b bytes, want $SUB_FILES files $SUB_BYTES bytes"
			return
		fi
		(cd "$dir" && sha256sum --quiet -c "$META/subset.sha256" >/dev/null 2>&1) || { echo "FAIL: checksum"; return; }
		echo ok
		return
	fi
	if [ "$mode" = files ]; then
		if [ "$f $b" != "$SRC_FILES $SRC_BYTES" ]; then
			echo "FAIL: $f files $b bytes, want $SRC_FILES files $SRC_BYTES bytes"
			return
		fi
	else
		want="$SRC_FILES files $SRC_DIRS dirs $SRC_BYTES bytes"
		if [ "$f $d $b" != "$SRC_FILES $SRC_DIRS $SRC_BYTES" ]; then
			echo "FAIL: $f files $d dirs $b bytes, want $want"
			return
		fi
	fi
	(cd "$dir" && sha256sum --quiet -c "$META/sample.sha256" >/dev/null 2>&1) || { echo "FAIL: checksum of the sample"; return; }
	echo ok
}

# ---------------------------------------------------------------- records
# record_prsync_summary OUT SCENARIO METHOD CASE REP LOG: append prsync's
# summary event of LOG to OUT/prsync-summaries.jsonl.
record_prsync_summary() {
	local out=$1 sc=$2 m=$3 kase=$4 rep=$5 log=$6
	[ -s "$log" ] || return 0
	grep -q '"type": *"summary"' "$log" || return 0
	{ printf '{"scenario":"%s","method":"%s","case":"%s","rep":%d,"event":' "$sc" "$m" "$kase" "$rep"
	  grep '"type": *"summary"' "$log" | tail -n1 | tr -d '\n'; echo '}'; } >>"$out/prsync-summaries.jsonl" || true
}

# proc_cpu PID -> the user+system CPU seconds of PID and of the children it
# has reaped (a daemon's finished sessions), from /proc/PID/stat; 0 if gone.
proc_cpu() {
	local pid=$1 tck
	tck=$(getconf CLK_TCK)
	[ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || { echo 0; return; }
	# Fields after the command name (which may hold spaces): utime is the 14th
	# field of the whole line, stime 15th, cutime 16th, cstime 17th.
	sed 's/^.*) //' "/proc/$pid/stat" | awk -v t="$tck" '{printf "%.3f\n", ($12+$13+$14+$15)/t}'
}

# ---------------------------------------------------------------- network
# Used by run.sh (--net) and scenarios.sh (scenario 5). The caller sets OUT,
# WORK, NET_STREAM, NET_LINK, NET_MAXCONN and NS_A= NS_B= NET_DAEMON_PID=.
# Two network namespaces joined by a veth pair, private addresses that exist
# only inside them, per-stream caps with tc htb (classes keyed by the client's
# source port, which is pinned to 256 ports), and an rsync daemon in the
# destination namespace. Everything is removed on exit.
net_teardown() {
	if [ -n "$NET_DAEMON_PID" ]; then
		kill "$NET_DAEMON_PID" 2>/dev/null || true
		wait "$NET_DAEMON_PID" 2>/dev/null || true
		NET_DAEMON_PID=
	fi
	if [ -n "$NS_A" ]; then ip netns del "$NS_A" 2>/dev/null || true; NS_A=; fi
	if [ -n "$NS_B" ]; then ip netns del "$NS_B" 2>/dev/null || true; NS_B=; fi
}

# tc_bits RATE -> bits per second (tc's units: bit kbit mbit gbit tbit, and
# bps kbps mbps gbps tbps in bytes per second; k is 1000).
tc_bits() {
	awk -v r="$1" 'BEGIN{
		n = r + 0; u = r; sub(/^[0-9.]+/, "", u)
		m = 1; if (u ~ /^k/) m = 1e3; else if (u ~ /^m/) m = 1e6; else if (u ~ /^g/) m = 1e9; else if (u ~ /^t/) m = 1e12
		if (u ~ /bps$/) m *= 8
		printf "%.0f\n", n * m }'
}

net_setup() {
	local va="prsbA$$" vb="prsbB$$" i cid port batch=$OUT/logs/tc.batch
	NS_A="prsb-src-$$"
	ip netns add "$NS_A" || { NS_A=; return 1; }
	NS_B="prsb-dst-$$"
	ip netns add "$NS_B" || { NS_B=; return 1; }
	ip link add "$va" netns "$NS_A" type veth peer name "$vb" netns "$NS_B" || return 1
	ip -n "$NS_A" addr add 10.200.0.1/24 dev "$va"
	ip -n "$NS_B" addr add 10.200.0.2/24 dev "$vb"
	ip -n "$NS_A" link set lo up
	ip -n "$NS_B" link set lo up
	ip -n "$NS_A" link set "$va" up
	ip -n "$NS_B" link set "$vb" up
	# Client source ports 50000-50255, one htb class each: NET_STREAM (400
	# Mbit/s) per TCP stream, NET_LINK (2 Gbit/s) for the link. Each class is
	# guaranteed the link / 256 (8 Mbit/s at 2 Gbit/s), at most its ceiling.
	# The kernel here has no netem, fq or sfq.
	local rate
	rate=$(awk -v s="$(tc_bits "$NET_STREAM")" -v l="$(tc_bits "$NET_LINK")" 'BEGIN{r=l/256; if (s<r) r=s; printf "%dkbit", (r/1000 < 1 ? 1 : r/1000)}')
	ip netns exec "$NS_A" sysctl -q -w net.ipv4.ip_local_port_range="50000 50255" net.ipv4.tcp_tw_reuse=1 || return 1
	{
		echo "qdisc add dev $va root handle 1: htb default 2"
		echo "class add dev $va parent 1: classid 1:1 htb rate $NET_LINK ceil $NET_LINK burst 1m cburst 1m quantum 65536"
		echo "class add dev $va parent 1:1 classid 1:2 htb rate $rate ceil $NET_STREAM burst 256k cburst 256k quantum 65536"
		for ((i = 0; i < 256; i++)); do
			cid=$(printf '%x' $((0x100 + i)))
			port=$((50000 + i))
			echo "class add dev $va parent 1:1 classid 1:$cid htb rate $rate ceil $NET_STREAM burst 256k cburst 256k quantum 65536"
			echo "filter add dev $va parent 1: protocol ip prio 1 u32 match ip sport $port 0xffff flowid 1:$cid"
		done
	} >"$batch"
	ip netns exec "$NS_A" tc -batch "$batch" || return 1
	mkdir -p "$WORK/net-dst"
	cat >"$OUT/logs/rsyncd.conf" <<EOF
pid file = $OUT/logs/rsyncd.pid
lock file = $OUT/logs/rsyncd.lock
use chroot = no
max connections = $NET_MAXCONN
log file = $OUT/logs/rsyncd.log
${DAEMON_SOCKOPTS:+socket options = $DAEMON_SOCKOPTS}
[bench]
	path = $WORK/net-dst
	read only = false
	uid = root
	gid = root
EOF
	ip netns exec "$NS_B" rsync --daemon --no-detach --address=10.200.0.2 --port=873 \
		--config="$OUT/logs/rsyncd.conf" >>"$OUT/logs/rsyncd.out" 2>&1 &
	NET_DAEMON_PID=$!
	for ((i = 0; i < 50; i++)); do
		ip netns exec "$NS_A" rsync rsync://10.200.0.2/ >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	say "run.sh: the rsync daemon in $NS_B did not answer"
	return 1
}

# ---------------------------------------------------------------- machine
# fs_desc DIR: the file system type of DIR; for ext4, whether it has a journal.
fs_desc() {
	local dev type
	if ! read -r dev type < <(findmnt -no SOURCE,FSTYPE -T "$1" 2>/dev/null) || [ -z "$type" ]; then
		df -PT "$1" | awk 'NR==2{print $2}'
		return
	fi
	if [ "$type" != ext4 ]; then
		echo "$type"
	elif compgen -G "/proc/fs/jbd2/${dev##*/}-*" >/dev/null; then
		echo "ext4 (journal)"
	else
		echo "ext4 (no journal)"
	fi
}

# warn_fs DIR: says so when DIR is on ext4 without a journal. There the kernel
# checks every free inode it might hand out for a recent deletion (fs/ext4/
# ialloc.c, recently_deleted, only without a journal) and skips those, so a
# tree written after one was deleted pays a scan: rsync over 2,000 small files
# took 0.81 s of system time against 0.28 s, and still 0.82 s two minutes after
# the delete. Every method pays it, unevenly.
warn_fs() {
	if [ "$(fs_desc "$1")" = "ext4 (no journal)" ]; then
		say "$ME: warning: $1 is on ext4 without a journal: fresh copies made right after a delete pay the kernel's scan past recently deleted inodes; use --work on a journaled file system for figures a user would see"
	fi
}

# machine_info TREE: key: value lines for the report (machine.txt).
machine_info() {
	local tree=$1
	echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "CPUs: $(nproc) ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1))"
	echo "memory: $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
	echo "kernel: $(uname -sr)"
	echo "filesystem: $(fs_desc "$WORK") (source and destination on the same one)"
	echo "rsync: $(rsync --version | head -n1 | awk '{print $3}')"
	have parallel && echo "GNU parallel: $(parallel --will-cite --version | head -n1 | awk '{print $3}')"
	have fpsync && echo "fpsync: $(fpsync -h 2>&1 | head -n1 | awk '{print $2}')"
	[ -n "$PRSYNC" ] && echo "prsync: $("$PRSYNC" --version 2>/dev/null | head -n2 | paste -sd " " -)"
	echo "tree: $tree"
	if [ "$CAN_DROP" = 1 ]; then echo "page cache: dropped before every run"; else echo "page cache: warm (could not drop it)"; fi
}
