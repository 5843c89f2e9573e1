#!/usr/bin/env bash
# The test suite: what `make test` and .ci/run run. It installs what a fresh machine lacks
# (rsync; as root on Debian/Ubuntu with apt-get), then runs gofmt, vet, staticcheck, a macOS
# build, the race-enabled unit tests, the integration tests (./tests) and, as root with dpkg and
# rpm, the release check. make test-full (PRSYNC_TEST_FULL=1) adds the whole direct-transport
# pass, a race-built harness, more rounds of the randomised tests, a fuzz smoke and a bench smoke.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"

apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    if [ -z "${apt_updated:-}" ]; then apt-get update -qq; apt_updated=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  else
    echo "test.sh: please install: $*" >&2
  fi
}

bash scripts/need-rsync.sh
# Optional parts of the suite, installed in CI (or with PRSYNC_TEST_INSTALL=1); skipped otherwise.
if [ -n "${CI:-}${PRSYNC_TEST_INSTALL:-}" ] && [ "$(uname)" = Linux ]; then
  export PRSYNC_TEST_INSTALL=1
  pkgs=()
  command -v python3 >/dev/null || pkgs+=(python3)
  command -v setpriv >/dev/null || pkgs+=(util-linux)
  command -v slurmctld >/dev/null || pkgs+=(slurmctld slurmd slurm-client munge)
  command -v sshd >/dev/null || [ -x /usr/sbin/sshd ] || pkgs+=(openssh-server openssh-client)
  command -v parallel >/dev/null || pkgs+=(parallel)
  command -v jq >/dev/null || pkgs+=(jq)
  command -v setfacl >/dev/null || pkgs+=(acl)
  command -v sshfs >/dev/null || pkgs+=(sshfs) # a FUSE DEST whose servers count as the copy's
  [ -x /usr/lib/openssh/sftp-server ] || pkgs+=(openssh-sftp-server)
  command -v ip >/dev/null || pkgs+=(iproute2) # network namespaces: a daemon in another one
  /usr/bin/python3 -c 'import yaml' 2>/dev/null || pkgs+=(python3-yaml)
  /usr/bin/python3 -c 'import debian.copyright' 2>/dev/null || pkgs+=(python3-debian) # the .deb's copyright file
  [ -f /usr/share/bash-completion/bash_completion ] || pkgs+=(bash-completion)
  command -v zsh >/dev/null || pkgs+=(zsh)
  command -v fish >/dev/null || pkgs+=(fish)
  command -v rpm >/dev/null || pkgs+=(rpm)
  command -v prometheus-node-exporter >/dev/null || pkgs+=(prometheus-node-exporter)
  command -v promtool >/dev/null || pkgs+=(prometheus)
  [ ${#pkgs[@]} -eq 0 ] || apt_install "${pkgs[@]}"
fi
rsync --version | sed -n 1p

# The release step at the end needs goreleaser, which a fresh machine builds from source
# (minutes of CPU): it is built now, in the background at the lowest priority, so that it
# takes the CPU the tests leave idle, and the release step waits for it.
release_check=
if [ "$(id -u)" = 0 ] && command -v dpkg >/dev/null && command -v rpm >/dev/null; then
  release_check=1
  if ! command -v goreleaser >/dev/null; then
    goreleaser_log=$(mktemp)
    nice -n 19 go install github.com/goreleaser/goreleaser/v2@v2.15.1 >"$goreleaser_log" 2>&1 &
    goreleaser_pid=$!
    trap 'kill "$goreleaser_pid" 2>/dev/null || true' EXIT # a failed suite leaves no build behind
  fi
fi

echo "== gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then echo "gofmt would change:" >&2; echo "$unformatted" >&2; exit 1; fi
echo "== vet"
go vet ./...
echo "== staticcheck"
command -v staticcheck >/dev/null || go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
staticcheck ./...
echo "== macOS build"
GOOS=darwin GOARCH=arm64 go build -o /dev/null ./...
echo "== tests (race)"
# the throttle's tests run alone: their busy loops would be other packages' tests' load
# (make test-busy gives the go test runs twice their time: PRSYNC_TEST_TIMEOUT_SCALE=2)
scale=${PRSYNC_TEST_TIMEOUT_SCALE:-1}
go test -race -count=1 -timeout $((5 * scale))m $(go list ./... | grep -v -e '/tests$' -e '/throttle$')
go test -race -count=1 -timeout $((5 * scale))m ./throttle/
echo "== integration tests (./tests: the prsync they run is race-built)"
# The prsync (and the scripts' prsync) that ./tests runs is always built with -race
# (tests/harness_run_test.go, bin). The harness around it (trees, events, walks of DEST) is built
# with -race in make test-full: it costs a third more CPU and runs none of prsync's code.
# The timing tests run first, one at a time; then the others side by side (t.Parallel), at
# most 8 at once (-parallel 8: many wait on rsync's --bwlimit, retries and daemons).
# ./tests holds TestReadme too: README's commands, run.
harness_race=
if [ -n "${PRSYNC_TEST_FULL:-}" ]; then harness_race=-race; fi
go test $harness_race -count=1 -parallel 8 -timeout $((15 * scale))m ./tests/
echo "== the copy and fault tests again in the direct transport"
# tests of a remote side skip themselves here (oncePerSuite): the transport is a local copy's.
# TestTransport* runs both forms in the first pass; this pass runs the receiver-side faults,
# odd names and layouts again in --transport direct, and make test-full (PRSYNC_TEST_FULL=1)
# every copy, fault, truth and verify test, with the randomised tests at more rounds.
direct='^Test(OddNames|Layouts|TruthLocal|TruthRace|Fault0[12347][A-Za-z]*|VanishedReal|RootAlone)$'
if [ -n "${PRSYNC_TEST_FULL:-}" ]; then direct='OddNames|Layouts|Vanished|Truth|Fault|Verify'; fi
PRSYNC_TEST_TRANSPORT=direct go test $harness_race -count=1 -parallel 8 -timeout $((10 * scale))m -run "$direct" ./tests/
# the fuzz targets' seed corpora ran with the unit tests above; make test-full fuzzes them
if [ -n "${PRSYNC_TEST_FULL:-}" ]; then
  echo "== fuzz smoke"
  go test -run '^$' -fuzz '^FuzzRecords$' -fuzztime 10s ./splitter/
  go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 10s ./rsync/
fi
if [ -f bench/go.mod ]; then
  echo "== bench module"
  (cd bench && go vet ./... && go test -count=1 ./...)
  # the bench scripts on tiny trees (bench/run.sh --smoke: the local bench and the seven
  # scenarios' smoke): make test-full
  if [ -n "${PRSYNC_TEST_FULL:-}" ] && [ -x bench/run.sh ]; then
    echo "== bench smoke"
    bash bench/run.sh --smoke
  fi
fi
if [ -n "$release_check" ]; then
  echo "== release: make release (goreleaser check, snapshot); the .deb installed, run, removed; the .rpm listed"
  if [ -n "${goreleaser_pid:-}" ] && ! wait "$goreleaser_pid"; then
    cat "$goreleaser_log" >&2
    echo "test.sh: go install goreleaser failed" >&2
    exit 1
  fi
  bash scripts/release-test.sh
elif [ "$(id -u)" = 0 ] && command -v dpkg >/dev/null; then
  echo "== .deb: build, install, run, man page, remove (no rpm: make release is not checked)"
  bash scripts/deb-test.sh
fi
echo "== all tests passed"
