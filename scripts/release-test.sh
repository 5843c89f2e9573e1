#!/usr/bin/env bash
# The release check (CI, as root on Debian/Ubuntu): make release (goreleaser check and a
# snapshot into dist/, nothing published), then the snapshot's .deb for this machine is
# installed with apt, run, its man page read and removed (scripts/deb-test.sh PACKAGE), and
# the .rpm's files, licence, dependency and conflicts are listed with rpm -qp (Debian's rpm
# package): the .rpm must carry the Apache-2.0 licence (its License tag and the text as a
# %license file) and conflict with pssh, whose /usr/bin/prsync it would overwrite.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"

say() { echo "release-test.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

command -v dpkg >/dev/null || die "it needs dpkg (Debian, Ubuntu)"
command -v rpm >/dev/null || die "it needs rpm (Debian's rpm package) to read the .rpm"

t0=$SECONDS
log=$(mktemp)
trap 'rm -f "$log"' EXIT
make release >"$log" 2>&1 || { tail -n 30 "$log" >&2; die "make release failed"; }
say "make release took $((SECONDS - t0)) s"

arch=$(dpkg --print-architecture)
case $arch in amd64) rpmarch=x86_64 ;; arm64) rpmarch=aarch64 ;; *) die "no package is built for $arch" ;; esac
debs=(dist/prsync_*_"$arch".deb)
rpms=(dist/prsync-*."$rpmarch".rpm)
[ ${#debs[@]} = 1 ] && [ -f "${debs[0]}" ] || die "make release made no single dist/prsync_*_$arch.deb: ${debs[*]}"
[ ${#rpms[@]} = 1 ] && [ -f "${rpms[0]}" ] || die "make release made no single dist/prsync-*.$rpmarch.rpm: ${rpms[*]}"

t0=$SECONDS
bash scripts/deb-test.sh "${debs[0]}"
say "the .deb's install, checks and removal took $((SECONDS - t0)) s"

want="/usr/bin/prsync
/usr/share/bash-completion/completions/prsync
/usr/share/doc/prsync/README.md
/usr/share/fish/vendor_completions.d/prsync.fish
/usr/share/licenses/prsync/LICENSE
/usr/share/man/man1/prsync.1.gz
/usr/share/zsh/vendor-completions/_prsync"
got=$(rpm -qlp "${rpms[0]}" 2>/dev/null | sort)
[ "$got" = "$want" ] || die "rpm -qlp ${rpms[0]}:
$got
want:
$want"
conflicts=$(rpm -qp --conflicts "${rpms[0]}" 2>/dev/null)
[ "$conflicts" = pssh ] || die "rpm -qp --conflicts ${rpms[0]}: '$conflicts', want pssh"
rpm -qp --requires "${rpms[0]}" 2>/dev/null | grep -x rsync >/dev/null || die "${rpms[0]} does not require rsync"
license=$(rpm -qp --queryformat '%{LICENSE}' "${rpms[0]}" 2>/dev/null)
[ "$license" = Apache-2.0 ] || die "rpm -qp --queryformat %{LICENSE} ${rpms[0]}: '$license', want Apache-2.0"
licfiles=$(rpm -qp --licensefiles "${rpms[0]}" 2>/dev/null)
[ "$licfiles" = /usr/share/licenses/prsync/LICENSE ] || die "rpm -qp --licensefiles ${rpms[0]}: '$licfiles'"
digest=$(rpm -qp --dump "${rpms[0]}" 2>/dev/null | awk '$1 == "/usr/share/licenses/prsync/LICENSE" {print $4}')
[ "$digest" = "$(sha256sum <LICENSE | cut -d' ' -f1)" ] || die "${rpms[0]}'s /usr/share/licenses/prsync/LICENSE is not LICENSE"
packager=$(rpm -qp --queryformat '%{PACKAGER} %{URL}' "${rpms[0]}" 2>/dev/null)
[ "$packager" = "The prsync authors (none)" ] || die "${rpms[0]}: packager and URL '$packager', want 'The prsync authors (none)'"
say "ok: ${rpms[0]} installs the files above, is Apache-2.0 with its text, requires rsync and conflicts with pssh"
