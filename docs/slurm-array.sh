#!/bin/bash
# prsync as a Slurm job array: array task K of N copies shard K/N of one shared list.
#
#   find /data/src -type f -print0 > list.0     # once, on any node that sees /data/src
#   mkdir -p logs && sbatch slurm-array.sh       # 8 tasks, one shard each
#
# Every task reads the same NUL-separated list, keeps only the paths whose hash falls in
# its shard, and writes its JSON-lines log to $LOGDIR/prsync.K.jsonl and the paths that did
# not make it to $LOGDIR/failed.K. The array must be numbered 0..N-1 (--array=0-7, not 1-8).
# To re-run one task of an 8-task array, keep N:  SHARDS=8 sbatch --array=3 slurm-array.sh
#
# The paths below are defaults; the environment overrides them (sbatch exports it).
# This file is run as-is by prsync's CI (tests/slurm_test.go), with --array=0-3.
#
#SBATCH --job-name=prsync
#SBATCH --array=0-7
#SBATCH --cpus-per-task=4
#SBATCH --output=prsync-%A_%a.err

set -euo pipefail

LIST=${LIST:-list.0}          # the shared list, NUL-separated (find -print0)
SRC=${SRC:-/data/src}         # the list's paths are under SRC, and land in DEST relative to it
DEST=${DEST:-/data/dst}       # a shared filesystem, or host:path, or rsync://host/module/path
LOGDIR=${LOGDIR:-logs}
PRSYNC=${PRSYNC:-prsync}
SHARDS=${SHARDS:-$SLURM_ARRAY_TASK_COUNT}

mkdir -p "$LOGDIR"
exec "$PRSYNC" -0 --from "$LIST" --root "$SRC" \
    --shard "$SLURM_ARRAY_TASK_ID/$SHARDS" \
    -j "${SLURM_CPUS_PER_TASK:-4}" \
    --failed "$LOGDIR/failed.$SLURM_ARRAY_TASK_ID" \
    "$DEST" >"$LOGDIR/prsync.$SLURM_ARRAY_TASK_ID.jsonl"
