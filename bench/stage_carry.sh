#!/usr/bin/env bash
# Stages binaries for one device call (no GPU here): builds the named targets in the calling worktree's
# build/ (-j1: the build machine is shared), strips them, xz's them into /work/main/.carry/NAME/ with the
# calling script, which is then run on the device with carry [".carry/NAME"].
#   bash bench/stage_carry.sh NAME SCRIPT TARGET...
set -euo pipefail
name="$1" script="$2"; shift 2
W="$(cd "$(dirname "$0")/.." && pwd)"
C=/work/main/.carry/$name
ninja -C "$W/build" -j1 "$@"
mkdir -p "$C"
rm -f "$C"/lina_*
for b in "$@"; do
  strip -o "$C/$b" "$W/build/tests/$b"
  xz -9 -f -T1 "$C/$b"
done
cp "$script" "$C/"
du -sh "$C"
