#!/usr/bin/env bash
# Installs rsync when it is missing: apt-get as root on Debian/Ubuntu; on macOS it says how.
command -v rsync >/dev/null && exit 0
case "$(uname)" in
  Darwin) echo "prsync needs rsync 3.1 or newer: brew install rsync" >&2; exit 1 ;;
esac
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rsync >/dev/null
else
  echo "prsync needs rsync 3.1 or newer: sudo apt-get install rsync" >&2; exit 1
fi
