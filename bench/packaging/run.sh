#!/usr/bin/env bash
# How long `pip install` of ddprun takes on this machine, and how big its wheel is (issue #32
# item 6): the launcher (ddprun and ddprun-store, in the wheel), and the trainer, which the
# first `ddprun ... train` compiles against the environment's torch.
# pip's downloads are excluded: the build requirements, the package's dependencies and torch
# are fetched into a wheelhouse first, and every timed pip command reads only that (--no-index
# --find-links). What is timed:
#   pip wheel ./clone      the build of the wheel (what `pip install ./clone` spends nearly all
#                          its time on), with zig's cache empty, as for a user's first install
#   pip install WHEEL      the install of that wheel and its dependencies (cmake, ninja,
#                          cmeel-yaml-cpp, nlohmann-json) into a fresh environment (a user given
#                          the wheel, or PyPI)
#   ddprun-train build     what the first `ddprun ... train` adds: build_against_torch.py
#                          compiling the trainer against the environment's torch 2.13 (installed
#                          beforehand, not timed: the user's own) into an empty cache
#   pip install ./clone    the whole launcher install from a clone, into a fresh environment,
#                          zig's cache now warm (skip it with --no-clone-install: it builds
#                          everything again)
# Each row gives wall time and CPU time (user+sys of pip and everything it ran). Not a test: no
# thresholds, nothing in CTest.
# Usage: bench/packaging/run.sh [--jobs N] [--no-clone-install]
#   --jobs N   parallel compiles (CMAKE_BUILD_PARALLEL_LEVEL); default: all CPUs
# Env: PYTHON (default python3, >= 3.11 for tomllib), TORCH (default 2.13.0). Writes only under
# a temporary folder it removes.
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
dependencies=$("$work/venv-tools/bin/python" -c '
import tomllib, sys
print("\n".join(tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]))
' "$source_dir/pyproject.toml")
mapfile -t dependency_list <<<"$dependencies"
torch_version=${TORCH:-2.13.0}
"$work/venv-tools/bin/pip" download --quiet --dest "$work/wheelhouse" "${requirement_list[@]}" \
  "${dependency_list[@]}" cmake ninja "torch==$torch_version"
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
timed "pip install WHEEL" "$work/venv-wheel/bin/pip" install "${offline[@]}" "$wheel"
"$work/venv-wheel/bin/ddprun" --version >/dev/null
"$work/venv-wheel/bin/pip" install --quiet --no-compile "${offline[@]}" "torch==$torch_version"
timed "ddprun-train build" env DDPRUN_CACHE_DIR="$work/cache" "$work/venv-wheel/bin/python" \
  "$work/venv-wheel/share/ddprun/build_against_torch.py" \
  --source "$work/venv-wheel/share/ddprun/trainer-source"
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
echo "ddprun pip install: $(nproc) CPUs, $jobs parallel compiles, $("$python" --version), torch $torch_version"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-28s %9s %9s\n' "step" "wall s" "CPU s"
printf '%s\n' "${rows[@]}"
# The launcher and the trainer together: the wheel's build and install, then the first train.
printf '%s\n' "${rows[@]:0:3}" | awk '{ wall += $(NF - 1); cpu += $NF }
  END { printf "%-28s %9.1f %9.1f\n", "launcher + trainer", wall, cpu }'
echo "wheel: $(basename "$wheel"), $wheel_kib KiB; installed ddprun + ddprun-store: $installed_kib KiB"
