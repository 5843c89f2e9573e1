#!/usr/bin/env bash
# The .deb check: builds a static prsync, its man page and completions, packs them into a
# .deb with nfpm (nfpm.yaml), installs it with dpkg, checks /usr/bin/prsync --version, the
# man page (rendered with no warnings), the completions and the licence (Debian's
# machine-readable copyright file, Apache-2.0; the maintainer, and no homepage that does not
# exist), then removes the package. As
# root on Debian/Ubuntu (make deb-test). It leaves the machine as it found it: the package is removed
# however the script ends, the Debian packages it had to install for the test (rsync,
# man-db) are purged again, and dist/nfpm is deleted. It refuses to run over a prsync that
# is installed already, by a package or by hand.
#
#   bash scripts/deb-test.sh [PACKAGE.deb]
#
# Given a .deb (scripts/release-test.sh gives make release's), it builds nothing: it installs
# that one with apt, as README's Install says, and checks it the same way.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"

say() { echo "deb-test.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "run it as root: it installs a package with dpkg"
command -v dpkg >/dev/null && command -v apt-get >/dev/null || die "it needs dpkg and apt-get (Debian, Ubuntu)"

deb=${1:-}
if [ -n "$deb" ]; then
  [ -f "$deb" ] || die "$deb: no such package"
  case $deb in /*|./*) ;; *) deb=./$deb ;; esac # apt takes a path, not a name, only so
fi
# the version of the test package: a leftover of an interrupted run is recognised by it, or
# by the marker written before a given .deb is installed and removed once it is purged
pkgver=0.0.0~debtest
marker=/var/lib/prsync-deb-test.installed
if [ -n "$deb" ]; then pkgver=$(dpkg-deb -f "$deb" Version); fi
files=(/usr/bin/prsync /usr/share/man/man1/prsync.1.gz /usr/share/bash-completion/completions/prsync
  /usr/share/zsh/vendor-completions/_prsync /usr/share/fish/vendor_completions.d/prsync.fish
  /usr/share/doc/prsync/README.md /usr/share/doc/prsync/copyright)

installed() { [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]; }

if installed prsync || dpkg-query -W prsync >/dev/null 2>&1; then
  if [ "$(dpkg-query -W -f='${Version}' prsync)" = 0.0.0~debtest ] ||
    { [ -f $marker ] && [ "$(cat $marker)" = "$(dpkg-query -W -f='${Version}' prsync)" ]; }; then
    say "removing the test package an interrupted run left"
    dpkg --purge prsync >/dev/null
    rm -f $marker
  else
    die "a prsync package is installed ($(dpkg-query -W -f='${Version}' prsync)); not replacing it"
  fi
fi
for f in "${files[@]}"; do
  [ ! -e "$f" ] || die "$f exists and no prsync package owns it; not overwriting it"
done

# what the test needs: rsync (the package depends on it) and man; whatever apt-get
# installs for it is purged at the end
before=$(dpkg-query -W -f='${db:Status-Status} ${Package}\n' | awk '$1 == "installed" {print $2}' | sort)
need=()
installed rsync || need+=(rsync)
command -v man >/dev/null || need+=(man-db)
dist_existed=false
[ -d dist ] && dist_existed=true
pkg_installed=false

cleanup() {
  local rc=$?
  if $pkg_installed; then
    dpkg --purge prsync >/dev/null && rm -f $marker || rc=1
  fi
  if [ ${#need[@]} -gt 0 ]; then
    local after new
    after=$(dpkg-query -W -f='${db:Status-Status} ${Package}\n' | awk '$1 == "installed" {print $2}' | sort)
    new=$(comm -13 <(echo "$before") <(echo "$after"))
    if [ -n "$new" ]; then
      # shellcheck disable=SC2086
      DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq $new >/dev/null || rc=1
    fi
  fi
  rm -rf dist/nfpm
  $dist_existed || rmdir dist 2>/dev/null || true
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]} for the test (purged again at the end)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ -n "$deb" ]; then
  # the package's own version, as goreleaser wrote it into the binary (0.0.1~next: 0.0.1-next)
  version=${pkgver//\~/-}
  commit=$(git rev-parse HEAD 2>/dev/null || true)
  echo "$pkgver" >$marker
  pkg_installed=true
  out=$(DEBIAN_FRONTEND=noninteractive apt install -y -qq "$deb" 2>&1) || die "apt install $deb: $(echo "$out" | tail -n 3)"
else
command -v nfpm >/dev/null || go install github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2

# build: the binary static, as goreleaser builds it (but without -trimpath, so that the
# packages go vet compiled before are reused: 18 s instead of 40 in CI), the man page and
# completions as make does
version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
commit=$(git rev-parse HEAD 2>/dev/null || true)
date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
mkdir -p dist/nfpm
CGO_ENABLED=0 go build -o dist/nfpm/prsync \
  -ldflags "-s -w -X github.com/prsync/prsync/cli.Version=$version -X github.com/prsync/prsync/cli.Commit=$commit -X github.com/prsync/prsync/cli.Date=$date" .
go run ./internal/docgen/cmd/prsync-docs -version="$version" -date="$(git log -1 --format=%cs 2>/dev/null || true)" \
  -man man/prsync.1 -completions completions
PKG_VERSION=$pkgver PKG_ARCH=$(dpkg --print-architecture) \
  nfpm pkg --config nfpm.yaml --packager deb --target dist/nfpm/prsync_test.deb >/dev/null

# install and check
pkg_installed=true
dpkg -i dist/nfpm/prsync_test.deb >/dev/null
fi
[ "$(dpkg-query -W -f='${Depends}' prsync)" = rsync ] || die "the package does not depend on rsync"
for f in "${files[@]}"; do
  [ -f "$f" ] || die "the package did not install $f"
done

# the licence: /usr/share/doc/prsync/copyright in Debian's machine-readable format
# (copyright-format 1.0), every file Apache-2.0, the full text of which Debian ships; read
# with python3-debian's strict parser when it is installed (CI installs it)
copyright=/usr/share/doc/prsync/copyright
[ "$(sed -n 1p $copyright)" = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" ] ||
  die "$copyright does not start with the copyright-format 1.0 Format line"
grep -qx 'Files: \*' $copyright && grep -qx 'License: Apache-2.0' $copyright ||
  die "$copyright does not give every file the Apache-2.0 licence"
if /usr/bin/python3 -c 'import debian.copyright' 2>/dev/null; then
  got=$(/usr/bin/python3 -c '
import sys
from debian.copyright import Copyright
with open(sys.argv[1]) as f:
    c = Copyright(f, strict=True)
print(" ".join(p.files[0] + "=" + p.license.synopsis for p in c.all_files_paragraphs()))
' $copyright 2>&1) || die "$copyright is not machine-readable: $got"
  [ "$got" = "*=Apache-2.0" ] || die "$copyright: files and licences $got, want *=Apache-2.0"
else
  say "python3-debian is not installed: $copyright's format is not parsed"
fi
[ -f /usr/share/common-licenses/Apache-2.0 ] || die "$copyright points to /usr/share/common-licenses/Apache-2.0, which is missing"
[ "$(dpkg-query -W -f='${Maintainer}' prsync)" = "The prsync authors" ] ||
  die "the package's maintainer is '$(dpkg-query -W -f='${Maintainer}' prsync)'"
[ -z "$(dpkg-query -W -f='${Homepage}' prsync)" ] ||
  die "the package names a homepage, $(dpkg-query -W -f='${Homepage}' prsync), and prsync has none that is public"

out=$(/usr/bin/prsync --version)
case $out in
  "prsync $version"*"commit $commit"*"needs rsync 3.1.0"*) ;;
  *) die "/usr/bin/prsync --version printed: $out" ;;
esac

warnings=$(MANWIDTH=80 man --warnings -l /usr/share/man/man1/prsync.1.gz 2>&1 >/dev/null) ||
  die "man -l /usr/share/man/man1/prsync.1.gz failed: $warnings"
[ -z "$warnings" ] || die "the man page renders with warnings: $warnings"
MANWIDTH=80 man -l /usr/share/man/man1/prsync.1.gz 2>/dev/null | grep 'prsync - parallel rsync' >/dev/null ||
  die "the man page does not render its NAME"
[ "$(man -w prsync 2>/dev/null)" = /usr/share/man/man1/prsync.1.gz ] || die "man -w prsync does not find the page"

if [ -f /usr/share/bash-completion/bash_completion ]; then
  # bash-completion's loader finds the installed completion, which completes the flags
  got=$(bash --norc --noprofile -c '
    source /usr/share/bash-completion/bash_completion
    _completion_loader prsync
    COMP_WORDS=(prsync --ch) COMP_CWORD=1 COMP_LINE="prsync --ch" COMP_POINT=11
    _prsync prsync --ch prsync
    echo "${COMPREPLY[*]}"')
  [ "$got" = "--chunk-files --chunk-bytes --chunk-time --chunk-wait" ] || die "the installed bash completion of prsync --ch: $got"
fi

dpkg --purge prsync >/dev/null
rm -f $marker
pkg_installed=false
for f in "${files[@]}"; do
  [ ! -e "$f" ] || die "dpkg --purge prsync left $f"
done
say "ok: installed, checked and removed prsync $version (${deb:-a .deb built with nfpm})"
