#!/usr/bin/env bash
# install_packages.sh WHO PKG... - installs those of the Debian packages PKG... that are not
# installed yet (apt-get, as root or through sudo); WHO prefixes the messages ("setup",
# "fuzz"). Exit status 1 when something is missing and cannot be installed.
set -euo pipefail
who=${1:?usage: install_packages.sh WHO PKG...}
shift
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0
echo "$who: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "$who: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
