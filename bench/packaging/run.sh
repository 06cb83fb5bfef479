#!/usr/bin/env bash
# How long `pip install` of ddprun takes on this machine, and how big its wheel is (issue #32
# item 6): the launcher only (ddprun and ddprun-store; the trainer is not in the package yet).
# pip's downloads are excluded: the build requirements are fetched into a wheelhouse first, and
# every timed pip command reads only that (--no-index --find-links). What is timed:
#   pip wheel ./clone      the build of the wheel (what `pip install ./clone` spends nearly all
#                          its time on), with zig's cache empty, as for a user's first install
#   pip install WHEEL      the install of that wheel into a fresh environment (a user given the
#                          wheel, or PyPI)
#   pip install ./clone    the whole thing from a clone, into a fresh environment, zig's cache
#                          now warm (skip it with --no-clone-install: it builds everything again)
# Each row gives wall time and CPU time (user+sys of pip and everything it ran). Not a test: no
# thresholds, nothing in CTest.
# Usage: bench/packaging/run.sh [--jobs N] [--no-clone-install]
#   --jobs N   parallel compiles (CMAKE_BUILD_PARALLEL_LEVEL); default: all CPUs
# Env: PYTHON (default python3, >= 3.11 for tomllib). Writes only under a temporary folder it removes.
set -euo pipefail
cd "$(dirname "$0")/../.."
source_dir=$PWD
python=${PYTHON:-python3}
jobs=$(nproc)
clone_install=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --no-clone-install) clone_install=0; shift ;;
    *) echo "usage: $0 [--jobs N] [--no-clone-install]" >&2; exit 2 ;;
  esac
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "$0: --jobs wants a positive number, not '$jobs'" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ddprun-pip-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/clone" "$work/wheelhouse" "$work/dist" "$work/tmp"
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - |
  tar -xf - -C "$work/clone"
export CMAKE_BUILD_PARALLEL_LEVEL=$jobs
export ZIG_GLOBAL_CACHE_DIR=$work/zig-cache  # empty: the first build is a user's first
export TMPDIR=$work/tmp                      # pip's build environments and scikit-build's build
export PIP_DISABLE_PIP_VERSION_CHECK=1

echo "== wheelhouse (not timed): the build requirements and what they need"
"$python" -m venv "$work/venv-tools"
requirements=$("$work/venv-tools/bin/python" -c '
import tomllib, sys
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["build-system"]["requires"]))
' "$source_dir/pyproject.toml")
mapfile -t requirement_list <<<"$requirements"
# cmake and ninja too: scikit-build-core asks for them where the machine has none recent enough.
"$work/venv-tools/bin/pip" download --quiet --dest "$work/wheelhouse" "${requirement_list[@]}" \
  cmake ninja
offline=(--no-index --find-links "$work/wheelhouse")

rows=()
# timed LABEL COMMAND...: runs COMMAND (its output to $work/<n>.log) and adds a table row.
timed() {
  local label=$1 log
  shift
  log=$work/$((${#rows[@]} + 1)).log
  local TIMEFORMAT='%R %U %S' times
  if ! times=$({ time "$@" >"$log" 2>&1; } 2>&1); then
    echo "$0: '$label' failed; its output:" >&2
    tail -40 "$log" >&2
    exit 1
  fi
  read -r real user sys <<<"$times"
  rows+=("$(awk -v l="$label" -v r="$real" -v u="$user" -v s="$sys" \
    'BEGIN { printf "%-28s %9.1f %9.1f", l, r, u + s }')")
  echo "${rows[-1]}"
}

echo "== timed (load average at start: $(cut -d' ' -f1-3 /proc/loadavg); $jobs parallel compiles)"
"$python" -m venv "$work/venv-build"
timed "pip wheel ./clone (cold)" "$work/venv-build/bin/pip" wheel --no-deps "${offline[@]}" \
  --wheel-dir "$work/dist" "$work/clone"
wheel=$(ls "$work"/dist/ddprun-*.whl)
"$python" -m venv "$work/venv-wheel"
timed "pip install WHEEL" "$work/venv-wheel/bin/pip" install --no-deps --no-index "$wheel"
"$work/venv-wheel/bin/ddprun" --version >/dev/null
if [[ $clone_install == 1 ]]; then
  "$python" -m venv "$work/venv-clone"
  timed "pip install ./clone (warm)" "$work/venv-clone/bin/pip" install "${offline[@]}" \
    "$work/clone"
  "$work/venv-clone/bin/ddprun" --version >/dev/null
fi

wheel_kib=$(($(stat -c %s "$wheel") / 1024))
installed_kib=$(du -k -c "$work/venv-wheel/bin/ddprun" "$work/venv-wheel/bin/ddprun-store" |
  tail -1 | cut -f1)
echo
echo "ddprun pip install, launcher only: $(nproc) CPUs, $jobs parallel compiles, $("$python" --version)"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-28s %9s %9s\n' "step" "wall s" "CPU s"
printf '%s\n' "${rows[@]}"
echo "wheel: $(basename "$wheel"), $wheel_kib KiB; installed ddprun + ddprun-store: $installed_kib KiB"
