#!/usr/bin/env bash
# Installs what halfscope needs on a Debian 12 machine (run by `make deps`): the Debian packages
# listed in tools/debian-packages.txt that are missing, then the Python packages of requirements.txt
# into .venv. Skips what is present, so a second run takes a second.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t wanted < <(grep -v '^\s*#' tools/debian-packages.txt | grep -v '^\s*$')
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "make deps: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  echo "make deps: note: no CUDA toolkit found (/usr/local/cuda); building the CPU backend only"
fi

stamp=.venv/.requirements-$(sha256sum requirements.txt | cut -c1-16)
if [ ! -f "$stamp" ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  echo "make deps: installing Python packages into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt
  rm -f .venv/.requirements-*
  touch "$stamp"
fi
