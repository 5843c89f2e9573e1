#!/bin/bash
# A real run's events, and the picture of its prsync report in README.md (docs/report.png):
# a tree of 3,000 files copied by an unprivileged user (run as root: setpriv), with three
# files it cannot read, two paths gone, a low --suspend-threshold and two CPU burners, so
# that the throttle pauses rsyncs; prsync ctl changes -j and the bandwidth limit mid-run.
# Usage: PRSYNC=./prsync docs/report-demo.sh [WORKDIR]; it needs chromium and imagemagick
# for the picture.
set -eu
PRSYNC=${PRSYNC:-prsync}
W=${1:-/tmp/prsync-report-demo}
rm -rf "$W"; mkdir -p "$W/src" "$W/dst"; chmod 755 "$W"; chmod 777 "$W/dst"
python3 - "$W/src" <<'PY'
import os, random, sys
random.seed(25)
src = sys.argv[1]
for d in range(30):
    os.makedirs(f"{src}/d{d:02}", exist_ok=True)
    for f in range(100):
        n = int(random.lognormvariate(10.5, 1.2))  # about 36 kB median, some MBs
        with open(f"{src}/d{d:02}/f{f:03}.dat", "wb") as fh:
            fh.write(os.urandom(min(n, 8 << 20)))
for name in ["d03/secret.key", "d17/payroll.db", "d17/<img src=x onerror=alert(1)> \"q\"\nnewline"]:
    with open(f"{src}/{name}", "w") as fh:
        fh.write("root only\n")
    os.chmod(f"{src}/{name}", 0o600)
PY
( cd "$W/src" && find . -type f -print0; printf './d09/gone-1\0./d21/gone-2\0' ) >"$W/list"
( sleep 12; for i in 1 2; do timeout 10 sh -c 'while :; do :; done' & done; wait ) &
setpriv --reuid=65534 --regid=65534 --clear-groups \
    "$PRSYNC" -0 -C "$W/src" -j 6 --chunk-files 60 --bwlimit 12M \
    --suspend-threshold 70 --resume-threshold 50 --max-suspend 5s \
    --no-progress "$W/dst" <"$W/list" >"$W/events.jsonl" &
pid=$!
sleep 20; setpriv --reuid=65534 --regid=65534 --clear-groups "$PRSYNC" ctl jobs 3 || true
sleep 6; setpriv --reuid=65534 --regid=65534 --clear-groups "$PRSYNC" ctl bwlimit 30M || true
wait $pid || echo "prsync exit $?"
wait
"$PRSYNC" report "$W/events.jsonl" -o "$W/report.html"
if command -v chromium >/dev/null && [ -x /usr/bin/convert ]; then
    profile=$(mktemp -d)
    chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" --hide-scrollbars --screenshot="$W/full.png" \
        --window-size=1200,3100 "file://$W/report.html" 2>/dev/null
    rm -rf "$profile"
    /usr/bin/convert "$W/full.png" -crop 1200x3060+0+0 +repage -resize 860x -colors 64 -strip "PNG8:$W/report.png"
    echo "$W/report.png"
fi
