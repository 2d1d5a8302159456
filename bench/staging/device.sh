#!/usr/bin/env bash
# The one place that knows the staging workflow: a GPU machine that receives a copy of the tree plus the
# carried files under .carry/ and .whl/, and returns what is written under $OUT (a few files, each under
# 16 MiB). On the development machine it packs what the device needs; on the device it unpacks the carried
# binaries, FLA's wheel and its autotune decisions, and calls a procedure of bench/procedures/ with the
# matching flags. On a machine that has lina built and FLA installed, call the procedures directly.
#
#   here:    bench/staging/device.sh pack [--build DIR] [--name bin|base] [--dry-run]
#              builds (-j1) and strips lina, liblina_c.so, the unit tests, the gate suites and the CUDA checks
#              of DIR (default build/) into .carry/NAME.tar.xz (a bin/ folder with SHA, the commit they were
#              built from), plus the PyTorch extension _C.so (python -m lina.bench) when DIR builds it
#              (LINA_BUILD_TORCH, against the device's torch version); --name base packs the base build for ab_verify
#            bench/staging/device.sh bundle [--dry-run]
#              .carry/lina.bundle: every ref of this repository, so that the device resolves --base and HEAD
#   device:  bench/staging/device.sh PROCEDURE [ARGS]      (from the tree's root; $OUT set by the workflow)
#              PROCEDURE: side_by_side, ab_verify, profile, sanitize, gpu_checks or sass; ARGS are its own
#              flags (bench/README.md), less --bin / --out, which this wrapper sets; the carried base build
#              unpacks to /tmp/lina-staging/base/bin (e.g. ab_verify --base-checks /tmp/lina-staging/base/bin)
#   carry:   .carry/bin.tar.xz (always), .carry/base.tar.xz (ab_verify without a base build there),
#            .carry/lina.bundle (ab_verify), .whl (side_by_side: FLA's wheel), .carry/fla-autotune.tgz (optional)
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
WORK=/tmp/lina-staging
USAGE="usage: bench/staging/device.sh pack [--build DIR] [--name bin|base] [--dry-run]
       bench/staging/device.sh bundle [--dry-run]
       bench/staging/device.sh side_by_side|ab_verify|profile|sanitize|gpu_checks|sass [ARGS]   (on the device, \$OUT set)"

die() {
  printf 'device.sh: %s\n' "$*" >&2
  exit 2
}
show() { printf '+ %s\n' "$*"; }

# The executables a device call may need, relative to a build folder.
PACKED=(cli/lina bindings/liblina_c.so tests/lina_unit_tests tests/lina_chunk_gla_gate tests/lina_chunk_kda_gate
        tests/lina_chunk_gdn_gate tests/lina_cuda_gla_check tests/lina_cuda_gla_bwd_check tests/lina_cuda_delta_check
        tests/lina_cuda_delta_bwd_check)

pack() {
  local build="$REPO/build" name=bin dry=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --build) [ $# -ge 2 ] || die "--build needs a value"; build="$2"; shift 2 ;;
      --name) [ $# -ge 2 ] || die "--name needs a value"; name="$2"; shift 2 ;;
      --dry-run) dry=1; shift ;;
      *) die "pack: unknown argument '$1' (expected --build, --name, --dry-run)" ;;
    esac
  done
  case "$name" in bin | base) ;; *) die "pack --name: got '$name', expected bin or base" ;; esac
  local packed=("${PACKED[@]}") targets=() p
  # the side by side's torch operators, where this build has the extension's target
  [ -d "$build/bindings/torch/CMakeFiles/lina_torch_ops.dir" ] && packed+=(bindings/torch/_C.so)
  for p in "${packed[@]}"; do targets+=("$(basename "$p")"); done
  targets=("${targets[@]/liblina_c.so/lina_c}")
  targets=("${targets[@]/_C.so/lina_torch_ops}")
  local src sha stage="$REPO/.carry/stage-$name"
  src="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)"
  [ -n "$src" ] || [ "$dry" = 1 ] || die "pack: $build is not a configured build folder (no CMakeCache.txt)"
  sha="$(git -C "${src:-$REPO}" rev-parse HEAD 2>/dev/null || echo unknown)"
  show "nice cmake --build $build -j1 --target ${targets[*]}"
  show "strip each of ${packed[*]} into $stage/bin; echo $sha > $stage/bin/SHA"
  show "tar -cJf $REPO/.carry/$name.tar.xz -C $stage bin"
  [ "$dry" = 1 ] && return 0
  nice cmake --build "$build" -j1 --target "${targets[@]}"
  rm -rf "$stage" && mkdir -p "$stage/bin"
  for p in "${packed[@]}"; do strip -o "$stage/bin/$(basename "$p")" "$build/$p"; done
  echo "$sha" >"$stage/bin/SHA"
  XZ_OPT="-9 -T1" tar -cJf "$REPO/.carry/$name.tar.xz" -C "$stage" bin
  rm -rf "$stage"
  du -h "$REPO/.carry/$name.tar.xz"
}

bundle() {
  [ "${1:-}" = "" ] || [ "$1" = --dry-run ] || die "bundle: unknown argument '$1' (expected --dry-run)"
  show "git -C $REPO bundle create $REPO/.carry/lina.bundle --all"
  [ "${1:-}" = --dry-run ] && return 0
  mkdir -p "$REPO/.carry"
  git -C "$REPO" bundle create "$REPO/.carry/lina.bundle" --all
}

# unpack NAME: .carry/NAME.tar.xz into $WORK/NAME (prints the bin/ folder), or nothing when not carried
unpack() {
  [ -f "$REPO/.carry/$1.tar.xz" ] || return 0
  rm -rf "${WORK:?}/$1" && mkdir -p "$WORK/$1" && tar -xJf "$REPO/.carry/$1.tar.xz" -C "$WORK/$1"
  echo "$WORK/$1/bin"
}

# Copies the procedure's output back: one tarball of all of it (without Nsight reports when that would pass
# the per-file limit), plus its top-level files when few and small enough to come back one by one.
return_output() {
  local out="$1" proc="$2" limit=$((15 << 20)) f n=0
  tar -czf "$OUT/$proc.tgz" -C "$(dirname "$out")" "$(basename "$out")"
  if [ "$(stat -c %s "$OUT/$proc.tgz")" -ge "$limit" ]; then
    echo "output over the per-file limit: the tarball leaves out the .ncu-rep files (kept in $out on the device)"
    tar -czf "$OUT/$proc.tgz" --exclude='*.ncu-rep' -C "$(dirname "$out")" "$(basename "$out")"
  fi
  for f in "$out"/*; do [ -f "$f" ] && n=$((n + 1)); done
  if [ "$n" -le 6 ]; then
    for f in "$out"/*; do
      if [ -f "$f" ] && [ "$(stat -c %s "$f")" -lt "$limit" ]; then cp "$f" "$OUT/"; fi
    done
  fi
  ls -la "$OUT"
}

device() {
  local proc="$1"
  shift
  local a
  for a in "$@"; do
    case "$a" in --bin | --out | --build) die "$proc: $a is set by this wrapper (the carried binaries, \$OUT)" ;; esac
  done
  local dry=0
  for a in "$@"; do [ "$a" = --dry-run ] && dry=1; done
  [ -n "${OUT:-}" ] || [ "$dry" = 1 ] || die "\$OUT is not set: this wrapper runs inside the staging workflow only"
  OUT="${OUT:-/tmp/lina-staging-out}"
  [ -f "$REPO/.carry/bin.tar.xz" ] || [ "$dry" = 1 ] || die "no .carry/bin.tar.xz: pack it here first (bench/staging/device.sh pack)"
  local bin base="" extra=()
  bin="$(unpack bin)"
  [ -n "$bin" ] || bin="$WORK/bin/bin"
  case "$proc" in
    side_by_side)
      if compgen -G "$REPO/.whl/*.whl" >/dev/null; then
        show "pip install --target $WORK/site .whl/*.whl (FLA and its pinned dependencies, no index)"
        [ "$dry" = 1 ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site" "$REPO"/.whl/*.whl
        extra+=(--fla-site "$WORK/site")
      fi
      # python -m lina.bench runs from this tree (PYTHONPATH=python) on the carried extension: side_by_side.sh
      # sets LINA_TORCH_LIB=$bin/_C.so from --bin
      extra+=(--triton-cache "$WORK/triton-cache" --save-autotune --git-sha "$(cat "$bin/SHA" 2>/dev/null || echo unknown)")
      [ -f "$REPO/.carry/fla-autotune.tgz" ] && extra+=(--load-autotune "$REPO/.carry/fla-autotune.tgz")
      ;;
    ab_verify)
      # the loop log lives in the development tree: add the row there from the returned verify JSON
      [[ " $* " == *" --loop-direction "* ]] && die "ab_verify: run \`lina loop log --from verify_OP.json\` here after the call, not on the device"
      base="$(unpack base)"
      if [ -n "$base" ]; then
        extra+=(--base-exe "$base/lina")
        # the base SHA unless the call names one
        [[ " $* " == *" --base "* ]] || extra+=(--base "$(cat "$base/SHA")")
      fi
      # the tree's copy on the device may not know the commits: resolve refs in a clone of the bundle
      if [ -f "$REPO/.carry/lina.bundle" ]; then
        show "git clone $REPO/.carry/lina.bundle $WORK/repo"
        [ "$dry" = 1 ] || { rm -rf "$WORK/repo" && git clone -q "$REPO/.carry/lina.bundle" "$WORK/repo"; }
        extra+=(--repo "$WORK/repo")
      fi
      ;;
    profile | sanitize | gpu_checks | sass) ;;
    *) die "unknown procedure '$proc'; expected side_by_side, ab_verify, profile, sanitize, gpu_checks or sass" ;;
  esac
  export LINA_CACHE_DIR="$WORK/lina-cache"  # lina's build cache for a --base without a carried build
  local rc=0
  bash "$REPO/bench/procedures/$proc.sh" --bin "$bin" --out "$WORK/out-$proc" "${extra[@]}" "$@" || rc=$?
  echo "$proc rc=$rc"
  [ "$dry" = 1 ] || return_output "$WORK/out-$proc" "$proc"
  return "$rc"
}

[ $# -ge 1 ] || { printf '%s\n' "$USAGE"; exit 2; }
case "$1" in
  -h | --help) printf '%s\n' "$USAGE" ;;
  pack) shift; pack "$@" ;;
  bundle) shift; bundle "$@" ;;
  *) device "$@" ;;
esac
