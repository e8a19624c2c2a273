#!/usr/bin/env bash
# Install the system packages listed in .ci/apt-packages.txt that are missing (make test
# runs this first). Installs them itself when it can: as root, or through sudo that needs no
# password. Otherwise it stops at once, printing the one command to run, and exits 1.
# Nothing missing: exits 0 without touching apt.
set -euo pipefail
cd "$(dirname "$0")/.."
list=.ci/apt-packages.txt
pkgs=$(grep -v '^\s*#' "$list" | tr -s ' \t\n' ' ' | sed 's/^ *//; s/ *$//')
[ -n "$pkgs" ] || exit 0
missing=()
for p in $pkgs; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [ "$status" = "install ok installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
cmd="apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
if [ "$(id -u)" -eq 0 ]; then
  as=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as=(sudo -n)
else
  echo "Missing system packages (from $list): ${missing[*]}" >&2
  echo "Install them, then rerun make:" >&2
  echo "    sudo sh -c '$cmd'" >&2
  exit 1
fi
echo "Installing system packages from $list: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${as[@]}" apt-get update -q
"${as[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
