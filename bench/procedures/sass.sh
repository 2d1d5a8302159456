#!/usr/bin/env bash
# SASS instructions and registers per kernel of a CUDA binary (no GPU needed): the instruction-cache budget
# of the large kernels (docs/kernels/chunk_delta_bwd.md) and the restructuring bar "SASS instruction counts
# and registers unchanged". With --base-binary, both binaries side by side and the kernels that differ.
# A kernel in an anonymous namespace carries per-build hashes in its mangled name; they are dropped, so
# the same kernel of two builds compares as one.
# cuobjdump comes with the CUDA toolkit (or the PyPI package nvidia-cuda-cuobjdump).
set -euo pipefail
# shellcheck source=bench/procedures/common.sh
source "$(dirname "$0")/common.sh"

USAGE="usage: bench/procedures/sass.sh --out DIR [--binary PATH] [--base-binary PATH] [--kernels REGEX] [--cuobjdump PATH]
         [--build DIR | --bin DIR] [--dry-run]
  --binary       the binary to count (default: the lina executable of --build / --bin, where the kernels are linked)
  --base-binary  a second binary (e.g. the same target built at the base commit): DIR/sass_diff.txt
  --kernels      regex over the mangled kernel names (default: all)
Writes DIR/sass.txt (instructions, registers, kernel), DIR/sass_base.txt and DIR/sass_diff.txt with a base;
exit 1 when --base-binary differs in any kernel's instructions or registers."

BINARY="" BASE_BINARY="" KERNELS="." CUOBJDUMP=""
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) need_value "$1" "$@"; BINARY="$2"; shift 2 ;;
    --base-binary) need_value "$1" "$@"; BASE_BINARY="$2"; shift 2 ;;
    --kernels) need_value "$1" "$@"; KERNELS="$2"; shift 2 ;;
    --cuobjdump) need_value "$1" "$@"; CUOBJDUMP="$2"; shift 2 ;;
    *) parse_common_flag "$@"; shift "$TAKEN" ;;
  esac
done
require_out
export LC_ALL=C  # sort and join agree on the order of kernel names
[ -n "$BINARY" ] || BINARY="$(lina_exe)"
require_file "$BINARY" "--binary"
[ -z "$BASE_BINARY" ] || require_file "$BASE_BINARY" "--base-binary"
if [ -z "$CUOBJDUMP" ]; then CUOBJDUMP="$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)"; fi
require_tool "$CUOBJDUMP" "cuobjdump (--cuobjdump)"

# count BINARY OUTFILE: "instructions registers kernel" per kernel matching --kernels, sorted by name
count() {
  printf '+ %s -sass %s | awk ... ; %s -res-usage %s | awk ... > %s\n' "$CUOBJDUMP" "$1" "$CUOBJDUMP" "$1" "$2"
  [ "$DRY_RUN" = 1 ] && return 0
  join -1 2 -2 2 -a 1 -e '-' -o '1.1,2.1,0' \
    <("$CUOBJDUMP" -sass "$1" | awk '/Function :/ { name = $3 } /^ +\/\*[0-9a-f]+\*\/ / { n[name]++ }
        END { for (f in n) print n[f], f }' | sort -k2,2) \
    <("$CUOBJDUMP" -res-usage "$1" | awk '/Function / { name = $2; sub(/:$/, "", name) }
        /REG:/ { for (i = 1; i <= NF; i++) if ($i ~ /^REG:/) { sub(/^REG:/, "", $i); print $i, name } }' | sort -u -k2,2) |
    sed -E 's/_GLOBAL__N__[0-9a-f]+_([0-9]+_[A-Za-z0-9_]*_cu)_[0-9a-f]{8}/_GLOBAL__N__\1/' |
    awk -v pat="$KERNELS" '$3 ~ pat' >"$2"
  echo "$(wc -l <"$2") kernels in $1"
}

count "$BINARY" "$OUT_DIR/sass.txt"
[ "$DRY_RUN" = 1 ] || column -t "$OUT_DIR/sass.txt"
[ -n "$BASE_BINARY" ] || exit 0
count "$BASE_BINARY" "$OUT_DIR/sass_base.txt"
[ "$DRY_RUN" = 1 ] && exit 0
# kernel, base instructions / registers, candidate instructions / registers, for the kernels that differ
join -1 3 -2 3 -a 1 -a 2 -e '-' -o '0,2.1,2.2,1.1,1.2' <(sort -k3,3 "$OUT_DIR/sass.txt") <(sort -k3,3 "$OUT_DIR/sass_base.txt") |
  awk '$2 != $4 || $3 != $5 { print }' >"$OUT_DIR/sass_diff.txt"
if [ -s "$OUT_DIR/sass_diff.txt" ]; then
  echo "kernels that differ (kernel, base instructions, base registers, instructions, registers):"
  cat "$OUT_DIR/sass_diff.txt"
  exit 1
fi
echo "no kernel differs in instructions or registers"
