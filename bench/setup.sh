# Sourced by each bench/*/run.sh, with the script's arguments. Sets root (the checkout) and build
# (the build folder: the first argument unless it is an option, which is then taken off the
# arguments; else root/build), made absolute because the benchmarks run their programs from other
# working directories, and configured for Release when new. bench_build TARGET... builds what a
# benchmark runs.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  build="$1"
  shift
fi
build="$(mkdir -p "$build" && cd "$build" && pwd)"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi

bench_build() {
  cmake --build "$build" -j"${JOBS:-$(nproc)}" --target "$@" >/dev/null
}

# Prints the path of a program of the project's venv (the reference torchrun, its Python), or
# says how to get it and fails.
venv_program() {
  local program="$root/.venv/bin/$1"
  if [ ! -x "$program" ]; then
    echo "bench: $program missing: run scripts/install-deps.sh" >&2
    return 1
  fi
  echo "$program"
}

# Sets data to a temporary corpus of $1 characters (the default corpus's generator, run by the
# venv's Python), deleted when the benchmark exits.
bench_corpus() {
  data="$(mktemp --suffix=.txt)"
  trap 'rm -f "$data"' EXIT
  "$(venv_program python)" "$root/worker-runtime/data/generate_corpus.py" --chars "$1" \
    --output "$data"
}
