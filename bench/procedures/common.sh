# Shared by the procedures in bench/procedures/ (sourced, not run): printing and running commands, the
# flags every procedure takes (--build, --bin, --out, --timeout, --dry-run, --help) and where lina's
# binaries are found. A procedure sets USAGE (its usage text) before calling parse_common_flag.
# shellcheck shell=bash
# shellcheck disable=SC2034  # the settings below are read by the procedures that source this file

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD_DIR="$REPO_ROOT/build"  # --build: a lina build folder (cli/lina, bindings/liblina_c.so, tests/...)
BIN_DIR=""                    # --bin: one flat folder with lina, liblina_c.so and the test executables
OUT_DIR=""                    # --out: where the procedure writes; required
STEP_TIMEOUT=0                # --timeout: seconds per step (0: none)
DRY_RUN=0                     # --dry-run: print the commands, run none
TAKEN=0                       # how many arguments parse_common_flag consumed

die() {
  printf '%s: %s\n' "$(basename "$0")" "$*" >&2
  exit 2
}

usage_exit() {
  printf '%s\n' "$USAGE"
  exit "${1:-0}"
}

# A flag's value: `need_value FLAG "$@"` fails when the value is missing.
need_value() {
  if [ $# -lt 3 ] || [[ "$3" == --* ]]; then die "$1 needs a value (see --help)"; fi
}

# Consumes one common flag at "$1" (sets TAKEN to 1 or 2); anything else is refused, naming it.
parse_common_flag() {
  case "$1" in
    --build) need_value "$1" "$@"; BUILD_DIR="$2"; TAKEN=2 ;;
    --bin) need_value "$1" "$@"; BIN_DIR="$2"; TAKEN=2 ;;
    --out) need_value "$1" "$@"; OUT_DIR="$2"; TAKEN=2 ;;
    --timeout)
      need_value "$1" "$@"
      [[ "$2" =~ ^[0-9]+$ ]] || die "--timeout: got '$2', expected whole seconds"
      STEP_TIMEOUT="$2"; TAKEN=2 ;;
    --dry-run) DRY_RUN=1; TAKEN=1 ;;
    -h | --help) usage_exit 0 ;;
    *) printf '%s: unknown argument %s\n' "$(basename "$0")" "'$1'" >&2; usage_exit 2 ;;
  esac
}

require_out() {
  [ -n "$OUT_DIR" ] || die "--out DIR is required (the folder this procedure writes to)"
  [ "$DRY_RUN" = 1 ] && return 0
  mkdir -p "$OUT_DIR/logs" || die "--out: cannot create '$OUT_DIR'"
  OUT_DIR="$(cd "$OUT_DIR" && pwd)"
}

# The command as one line that a shell reads back as the same words (plain words stay unquoted).
quoted() {
  local out="" a
  for a in "$@"; do
    if [[ -n "$a" && "$a" =~ ^[A-Za-z0-9_./=:,@+%-]+$ ]]; then out+="$a "; else out+="$(printf '%q' "$a") "; fi
  done
  printf '%s' "${out% }"
}

say() { printf '== %s\n' "$*"; }

# run CMD...: prints the command, then runs it (under --timeout when set) unless --dry-run.
run() {
  printf '+ %s\n' "$(quoted "$@")"
  [ "$DRY_RUN" = 1 ] && return 0
  if [ "$STEP_TIMEOUT" -gt 0 ]; then timeout "$STEP_TIMEOUT" "$@"; else "$@"; fi
}

# run_logged LOG CMD...: as run, stdout and stderr into LOG; returns the command's status.
run_logged() {
  local log="$1"
  shift
  printf '+ %s > %s 2>&1\n' "$(quoted "$@")" "$log"
  [ "$DRY_RUN" = 1 ] && return 0
  local rc=0
  if [ "$STEP_TIMEOUT" -gt 0 ]; then timeout "$STEP_TIMEOUT" "$@" >"$log" 2>&1 || rc=$?; else "$@" >"$log" 2>&1 || rc=$?; fi
  return "$rc"
}

# Paths of lina's binaries: in --bin DIR when given, else in the build folder's layout.
lina_exe() { if [ -n "$BIN_DIR" ]; then echo "$BIN_DIR/lina"; else echo "$BUILD_DIR/cli/lina"; fi; }
lina_lib() { if [ -n "$BIN_DIR" ]; then echo "$BIN_DIR/liblina_c.so"; else echo "$BUILD_DIR/bindings/liblina_c.so"; fi; }
test_exe() { if [ -n "$BIN_DIR" ]; then echo "$BIN_DIR/$1"; else echo "$BUILD_DIR/tests/$1"; fi; }

# require_file PATH WHAT: a missing binary ends the procedure (not under --dry-run, which only prints).
require_file() {
  [ "$DRY_RUN" = 1 ] || [ -e "$1" ] || die "$2 not found at $1 (build lina, or pass --build DIR / --bin DIR)"
}

# require_tool PATH WHAT: a missing tool (compute-sanitizer, cuobjdump) ends the procedure, as require_file.
require_tool() {
  [ "$DRY_RUN" = 1 ] || [ -x "$1" ] || die "$2 not found at $1 (install it, or name it with its flag)"
}

# The machine line (GPU, clocks, driver) into OUT/machine.txt, beside the lina binary's version.
record_machine() {
  say "machine"
  if [ "$DRY_RUN" = 1 ]; then
    echo "+ nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,memory.total --format=csv,noheader > $OUT_DIR/machine.txt"
    return 0
  fi
  { nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,driver_version,memory.total --format=csv,noheader 2>&1 || true
    "$(lina_exe)" --version 2>&1 || true
  } | tee "$OUT_DIR/machine.txt"
}

# note_status RC: keeps the first non-zero status in STATUS (the procedure's exit status).
STATUS=0
note_status() { if [ "$1" != 0 ] && [ "$STATUS" = 0 ]; then STATUS="$1"; fi; }

# split_list "a,b c" -> one word per line
split_list() { tr ',' '\n' <<<"$1" | tr -s ' ' '\n' | sed '/^$/d'; }
