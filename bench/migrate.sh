#!/usr/bin/env bash
# bench/migrate.sh: what the final pass of a migration costs (issue 12).
#
# DEST holds a full copy of the generated tree (the old state); the source, a
# copy of that tree (the cached tree itself is never changed), has since lost
# about 1 % of its files and two whole table directories, gained about 1 %
# new files (and a new table directory), and had about 1 % modified. Six ways
# of making DEST match run side by side, interleaved, cold cache, each from
# the same DEST state (restored outside the timing before every run):
#
#   (i)   cd SRC; find . -print0 | prsync -0 --root SRC DEST      the copy alone
#   (ii)  ... --delete                                            + deletion pass
#   (iii) ... --verify                                            + checksum pass
#   (iv)  ... --delete --verify
#   (v)   rsync -a --delete SRC/ DEST/                            one serial rsync
#   (vi)  rsync -ac SRC/ DEST/                                    a checksum run
#
# After each run the whole tree is compared (names, types, sizes, mtimes) and
# the changed files plus a sample are checksummed: DEST must equal SRC after
# (ii), (iv) and (v), and hold all of SRC after the others.
#
#   bench/migrate.sh                     # profile small, 3 repetitions
#   bench/migrate.sh --profile tiny --reps 1
#
# Every option also reads an environment variable, listed by --help.
set -euo pipefail
export LC_ALL=C

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$BENCH_DIR/.." && pwd -P)
ME=migrate.sh
# shellcheck source=lib.sh
. "$BENCH_DIR/lib.sh"

PROFILE=${BENCH_PROFILE:-small}
REPS=${BENCH_REPS:-3}
SEED=${BENCH_SEED:-1}
WORK=${BENCH_WORK:-/var/tmp/prsync-bench}
OUT=${BENCH_OUT:-}
PRSYNC=${PRSYNC:-}
ALL_RUNS="prsync-final prsync-final-delete prsync-final-verify prsync-final-delete-verify rsync-delete rsync-checksum"
RUNS=${BENCH_MIGRATE_RUNS:-$ALL_RUNS}
DEL_PCT=${BENCH_MIGRATE_DELETE_PCT:-1}
DEL_DIRS=${BENCH_MIGRATE_DELETE_DIRS:-2}
MOD_PCT=${BENCH_MIGRATE_MODIFY_PCT:-1}
ADD_PCT=${BENCH_MIGRATE_ADD_PCT:-1}
ADD_DIRS=${BENCH_MIGRATE_ADD_DIRS:-1}
MUT_SEED=${BENCH_MIGRATE_SEED:-1}
PRSYNC_OPTS=${BENCH_PRSYNC_OPTS:-}
KEEP=${BENCH_MIGRATE_KEEP:-0}
DROP=${BENCH_DROP_CACHES:-auto}
SAMPLE_N=${BENCH_SAMPLE:-50}
PERFILE_N=${BENCH_PERFILE_FILES:-500}

usage() {
	cat <<EOF
usage: bench/migrate.sh [options]

  --profile NAME     tree profile: tiny, small (default), many, big       [BENCH_PROFILE]
  --reps N           repetitions, interleaved (default 3)                  [BENCH_REPS]
  --seed N           tree seed (default 1)                                 [BENCH_SEED]
  --runs LIST        subset of: $ALL_RUNS
                     (default: all six)                                    [BENCH_MIGRATE_RUNS]
  --delete-pct P     per cent of the files deleted from the source (1)     [BENCH_MIGRATE_DELETE_PCT]
  --delete-dirs N    whole table directories deleted, the smallest (2)     [BENCH_MIGRATE_DELETE_DIRS]
  --modify-pct P     per cent modified (1): half in place, half appended   [BENCH_MIGRATE_MODIFY_PCT]
  --add-pct P        per cent added as new SSTables (1)                    [BENCH_MIGRATE_ADD_PCT]
  --add-dirs N       new table directories among them (1)                  [BENCH_MIGRATE_ADD_DIRS]
  --mutate-seed N    seed of the changes (1)                               [BENCH_MIGRATE_SEED]
  --prsync-opts STR  extra prsync flags for (i)-(iv) (default none)        [BENCH_PRSYNC_OPTS]
  --out DIR          results (default /tmp/prsync-bench/migrate-DATE-PROFILE) [BENCH_OUT]
  --work DIR         trees (cached, shared with run.sh) and the copies
                     (default /var/tmp/prsync-bench)                       [BENCH_WORK]
  --prsync PATH      prsync binary (default: built from the repo)          [PRSYNC]
  --keep             keep the changed source and DEST in WORK/migrate      [BENCH_MIGRATE_KEEP=1]
  --no-drop-caches   keep the page cache warm                              [BENCH_DROP_CACHES=0]
Also BENCH_SAMPLE (50): files checksummed besides the changed ones.
Disk: the cached tree, a changed copy and DEST (3 × 1.1 GB for small).
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--profile) PROFILE=$2; shift ;;
	--reps) REPS=$2; shift ;;
	--seed) SEED=$2; shift ;;
	--runs) RUNS=$2; shift ;;
	--delete-pct) DEL_PCT=$2; shift ;;
	--delete-dirs) DEL_DIRS=$2; shift ;;
	--modify-pct) MOD_PCT=$2; shift ;;
	--add-pct) ADD_PCT=$2; shift ;;
	--add-dirs) ADD_DIRS=$2; shift ;;
	--mutate-seed) MUT_SEED=$2; shift ;;
	--prsync-opts) PRSYNC_OPTS=$2; shift ;;
	--out) OUT=$2; shift ;;
	--work) WORK=$2; shift ;;
	--prsync) PRSYNC=$2; shift ;;
	--keep) KEEP=1 ;;
	--no-drop-caches) DROP=0 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
	shift
done

case "$REPS" in '' | *[!0-9]* | 0) die "--reps must be a positive integer" ;; esac
case "$PROFILE" in tiny | small | many | big) ;; *) die "unknown profile $PROFILE" ;; esac
for r in $RUNS; do
	case " $ALL_RUNS " in *" $r "*) ;; *) die "unknown run $r (one of: $ALL_RUNS)" ;; esac
done
read -r -a RUN_LIST <<<"$RUNS"
[ "${#RUN_LIST[@]}" -gt 0 ] || die "no runs"

STAMP=$(date +%Y%m%d-%H%M%S)
OUT=${OUT:-/tmp/prsync-bench/migrate-$STAMP-$PROFILE}
OUT=$(realpath -m "$OUT")
WORK=$(realpath -m "$WORK")
for d in "$OUT" "$WORK"; do
	case "$d/" in "$REPO"/*) die "$d is inside the repository; use a directory under /tmp or /var/tmp" ;; esac
done
mkdir -p "$OUT/logs" "$WORK"
warn_fs "$WORK"
IS_ROOT=0
[ "$(id -u)" = 0 ] && IS_ROOT=1

BIN=$WORK/bin
bench_build_tools "$BIN" "$OUT/logs" gentree measure report
[ -n "$PRSYNC" ] || die "no prsync binary"
bench_drop_setup

# ---------------------------------------------------------------- trees
prepare_tree "$PROFILE"
ORIG=$SRC
MIG=$WORK/migrate
MSRC=$MIG/src
MDST=$MIG/dst
REF=$OUT/reference
mkdir -p "$MIG" "$REF"
cleanup() {
	if [ "$KEEP" != 1 ]; then rm -rf "$MSRC" "$MDST"; rmdir "$MIG" 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "== results in $OUT; the changed source in $MSRC, DEST in $MDST"
say "== copying $ORIG to the work source and changing it"
rm -rf "$MSRC"
cp -a "$ORIG" "$MSRC"
"$GENTREE" -mutate "$MSRC" -seed "$MUT_SEED" -manifest "$REF/manifest" -delete-pct "$DEL_PCT" -delete-dirs "$DEL_DIRS" \
	-modify-pct "$MOD_PCT" -add-pct "$ADD_PCT" -add-dirs "$ADD_DIRS" >"$REF/mutate.txt" || die "gentree -mutate failed"
cat "$REF/mutate.txt" >&2

# listing DIR -> sorted lines: files with size and mtime, links with their
# target, directories and the rest by name (their sizes and mtimes vary).
listing() {
	(cd "$1" && find . -mindepth 1 \( -type f -printf 'f %s %T@ %P\n' \) -o \( -type l -printf 'l %l %P\n' \) -o -printf '%y %P\n') | sort
}
listing "$MSRC" >"$REF/src.list"
# Checksums: every added and modified file, and a sample of the rest.
sed -n 's/^f [^ ]* [^ ]* //p' "$REF/src.list" >"$REF/files"
{
	awk '$1 == "A" || $1 == "M" {print substr($0, 3)}' "$REF/manifest"
	awk -v n="$SAMPLE_N" 'NR==FNR{c++; next} {if ((FNR-1) % int(c/n > 1 ? c/n : 1) == 0) print}' "$REF/files" "$REF/files"
} | sort -u | tr '\n' '\0' | (cd "$MSRC" && xargs -0 -r sha256sum) >"$REF/check.sha256"
read -r SRC_FILES SRC_DIRS SRC_BYTES < <(tree_stats "$MSRC")
mut() { sed -n "s/.* $1=\([0-9]*\).*/\1/p" "$REF/mutate.txt"; }
CHANGES="$(mut deleted_dir_files) files in $(mut deleted_dirs) directories removed, $(mut deleted_files) other files deleted, $(mut modified) modified, $(mut added) added (new directories: $(mut added_dirs))"
say "== source: $SRC_FILES files, $SRC_DIRS dirs, $SRC_BYTES bytes; changes: $CHANGES"

# verify_mig DIR equal|superset -> ok or FAIL: reason
verify_mig() {
	local dir=$1 mode=$2 n
	listing "$dir" >"$OUT/logs/dest.list"
	if [ "$mode" = equal ]; then
		if ! cmp -s "$REF/src.list" "$OUT/logs/dest.list"; then
			n=$(diff "$REF/src.list" "$OUT/logs/dest.list" | grep -c '^[<>]' || true)
			echo "FAIL: $n entries differ from SRC (first: $(diff "$REF/src.list" "$OUT/logs/dest.list" | grep -m1 '^[<>]' | cut -c1-120))"
			return
		fi
	else
		n=$(comm -23 "$REF/src.list" "$OUT/logs/dest.list" | wc -l)
		if [ "$n" != 0 ]; then
			echo "FAIL: $n entries of SRC missing or different (first: $(comm -23 "$REF/src.list" "$OUT/logs/dest.list" | head -n1 | cut -c1-120))"
			return
		fi
	fi
	(cd "$dir" && sha256sum --quiet -c "$REF/check.sha256" >/dev/null 2>&1) || { echo "FAIL: checksums"; return; }
	echo ok
}

# restore_dest: DEST back to the old copy (the cached tree), outside the timing.
restore_dest() {
	mkdir -p "$MDST"
	rsync -a --delete "$ORIG"/ "$MDST"/ || die "restoring DEST failed"
}

# ---------------------------------------------------------------- runs
m_prsync_final() {
	# shellcheck disable=SC2086 # word lists on purpose
	cd "$SRC" && find . -print0 | "$PRSYNC" -0 $PRSYNC_OPTS $PR_ARGS --root "$SRC" "$DEST" >"$PRLOG"
}
m_rsync_delete() { rsync -a --delete "$SRC"/ "$DEST"/; }
m_rsync_checksum() { rsync -ac "$SRC"/ "$DEST"/; }
export -f m_prsync_final m_rsync_delete m_rsync_checksum
export PRSYNC PRSYNC_OPTS

label_of() {
	local p="find -print0 | prsync -0${PRSYNC_OPTS:+ ${PRSYNC_OPTS//,/;}} --root SRC DEST"
	case "$1" in
	prsync-final) echo "(i) $p (the copy alone)" ;;
	prsync-final-delete) echo "(ii) $p --delete" ;;
	prsync-final-verify) echo "(iii) $p --verify" ;;
	prsync-final-delete-verify) echo "(iv) $p --delete --verify" ;;
	rsync-delete) echo "(v) rsync -a --delete SRC/ DEST/ (one serial rsync)" ;;
	rsync-checksum) echo "(vi) rsync -ac SRC/ DEST/ (checksum run; no --delete)" ;;
	esac
}

RESULTS=$OUT/results.csv
echo "profile,scenario,method,label,case,rep,jobs,extrapolated,scale,wall_s,user_s,sys_s,maxrss_kb,exit,verify,files,bytes,server_cpu_s" >"$RESULTS"
FAILURES=0

run_one() { # METHOD REP
	local m=$1 rep=$2 tag res v fn=m_prsync_final mode=superset wall user sys rss code
	tag="migrate-$m-final-$rep"
	res=$OUT/logs/$tag.time
	export SRC=$MSRC DEST=$MDST PRLOG=$OUT/logs/$tag.jsonl PR_ARGS=
	case "$m" in
	prsync-final) ;;
	prsync-final-delete) PR_ARGS=--delete mode=equal ;;
	prsync-final-verify) PR_ARGS=--verify ;;
	prsync-final-delete-verify) PR_ARGS="--delete --verify" mode=equal ;;
	rsync-delete) fn=m_rsync_delete mode=equal ;;
	rsync-checksum) fn=m_rsync_checksum ;;
	esac
	restore_dest
	drop_caches
	"$MEASURE" -o "$res" -- bash -c "$fn" >"$OUT/logs/$tag.out" 2>"$OUT/logs/$tag.err" || true
	read -r wall user sys rss code <"$res" || { wall=0 user=0 sys=0 rss=0 code=127; }
	v=$(verify_mig "$MDST" "$mode")
	[[ "$m" != prsync-* ]] || record_prsync_summary "$OUT" migrate "$m" final "$rep" "$PRLOG"
	if [ "$code" != 0 ] || [ "$v" != ok ]; then
		FAILURES=$((FAILURES + 1))
		say "   !! $tag: exit $code, verify: $v (logs: $OUT/logs/$tag.err)"
	fi
	echo "$PROFILE,migrate,$m,$(label_of "$m"),final,$rep,0,0,1,$wall,$user,$sys,$rss,$code,$v,$SRC_FILES,$SRC_BYTES," >>"$RESULTS"
	say "$(printf '   [migrate %d] %-27s %8.2f s  cpu %6.2f s  %s' "$rep" "$m" "$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" "$v")"
}

say "== preparing DEST (a full copy of the old tree)"
rm -rf "$MDST"
restore_dest
# The starting state must need a final pass: check it does, once.
if [ "$(verify_mig "$MDST" superset)" = ok ]; then die "DEST already holds the changed source: the mutation did nothing"; fi

n=${#RUN_LIST[@]}
say "== $REPS repetition(s) of: ${RUN_LIST[*]}"
for ((rep = 1; rep <= REPS; rep++)); do
	for ((i = 0; i < n; i++)); do
		run_one "${RUN_LIST[$(((i + rep - 1) % n))]}" "$rep"
	done
done

TREE_DESC="profile $PROFILE, seed $SEED, changed: $SRC_FILES files in $SRC_DIRS directories, $(awk -v b="$SRC_BYTES" 'BEGIN{if (b >= 1e9) printf "%.2f GB", b/1e9; else printf "%.1f MB", b/1e6}'); since DEST's copy: $CHANGES"
{
	machine_info "$TREE_DESC"
	echo "changes: --delete-pct $DEL_PCT --delete-dirs $DEL_DIRS --modify-pct $MOD_PCT --add-pct $ADD_PCT --add-dirs $ADD_DIRS --mutate-seed $MUT_SEED"
} >"$OUT/machine.txt"
"$BIN/report" -in "$RESULTS" -machine "$OUT/machine.txt" -summary "$OUT/summary.csv" -md "$OUT/RESULTS.md" \
	-prsync-summaries "$OUT/prsync-summaries.jsonl" -title "## prsync migration benchmark: the final pass (bench/migrate.sh)"
say "== done: $OUT"
if [ "$FAILURES" -gt 0 ]; then
	say "$ME: $FAILURES run(s) failed or did not verify"
	exit 1
fi
