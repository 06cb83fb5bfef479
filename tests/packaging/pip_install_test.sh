#!/usr/bin/env bash
# Issue #32: ddprun installs with pip, without root, from PyPI alone, its wheel is portable, and
# `ddprun ... train` builds ddprun-train against the environment's own torch on first use.
#
# As the user `nobody`, in mount namespaces where Debian's development packages are hidden
# (empty folders over the Boost, nlohmann, yaml-cpp, Gloo and Catch2 headers and CMake packages,
# empty files over the Boost and yaml-cpp libraries), this test
#   1. builds the wheel of a copy of the source tree with `pip wheel` (build requirements from
#      the package index only: scikit-build-core, boost-headers, nlohmann-json, ziglang), with
#      gcc, g++, cc, c++, clang and ld hidden too: the launcher and store build with nothing but
#      PyPI;
#   2. installs that wheel with its dependencies (cmake, ninja, cmeel-yaml-cpp, nlohmann-json)
#      into a fresh virtual environment and runs ddprun --help, --version, ddprun-store --help
#      and a two-worker standalone job from the environment's bin/;
#   3. runs `auditwheel show` on the wheel and requires manylinux_2_28 or older, and a wheel
#      file named so;
#   4. with the system's C++ compiler visible again (the one thing besides PyPI that building
#      the trainer needs), runs `ddprun ... train` from that environment: first where it cannot
#      build ddprun-train (no torch yet, Debian's torch 1.13 through PYTHON_EXEC, CXX naming no
#      compiler, a cache folder it cannot write), each one clear message, a non-zero exit and no
#      ddprun-train left anywhere; then, with torch 2.13 installed from PyPI, two jobs at once,
#      so that one builds ddprun-train into the cache while the other waits for it, and both
#      train to their last epoch;
# then, as root, checks with readelf and objdump that the installed binaries need nothing but
# libc and no glibc symbol newer than 2.28.
# `pip install ./ddprun` runs the same PEP 517 build and then installs the wheel; the test makes
# the two steps visible so that it can inspect the wheel in between with one build, not two.
#
# The PyPI packages come from SOURCE_DIR/.wheelhouse when it exists (scripts/install-deps.sh
# --tests downloads them there, so that the test runs in scripts/test.sh's network namespace,
# which has no network), else from the machine's package index.
# Exit 77 (CTest SKIP_RETURN_CODE) only where the test cannot run at all: not root (unshare,
# setpriv), no unshare/setpriv, or neither a .wheelhouse nor a network route to the index.
# Usage: tests/packaging/pip_install_test.sh SOURCE_DIR
# Env: JOBS (parallel compiles, default: all CPUs), PYTHON (default /usr/bin/python3).
set -euo pipefail

source_dir=$(cd "${1:?usage: $0 SOURCE_DIR}" && pwd)
python=${PYTHON:-/usr/bin/python3}
test_user=nobody
skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

[[ $(id -u) -eq 0 ]] || skip "needs root: a mount namespace (unshare) and another user (setpriv)"
for tool in unshare setpriv mount readelf objdump; do
  command -v "$tool" >/dev/null || skip "no $tool on this machine"
done
unshare --mount true 2>/dev/null || skip "unshare --mount is not permitted here"
wheelhouse=$source_dir/.wheelhouse
if [[ ! -d $wheelhouse ]] && command -v ip >/dev/null && [[ -z $(ip -4 route show default) &&
  -z $(ip -6 route show default) && -z ${https_proxy:-}${HTTPS_PROXY:-} ]]; then
  skip "no .wheelhouse (scripts/install-deps.sh --tests) and no network route to the package index"
fi
[[ -x $python ]] || fail "no $python (set PYTHON to a Python >= 3.10 with venv)"
test_uid=$(id -u "$test_user") || fail "no user $test_user"
test_gid=$(id -g "$test_user")

# $work: root's (the scripts, what the namespace mounts); $user_dir: the test user's, where
# everything it builds and installs goes.
work=$(mktemp -d "${TMPDIR:-/tmp}/ddprun-pip-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
user_dir=$work/user
mkdir -p "$user_dir/home" "$user_dir/clone" "$user_dir/dist" "$work/hidden-dir" "$work/root-cache"
: >"$work/hidden-file"

# The clone: the files git knows, committed or not (no build folders or virtual environments).
if git -C "$source_dir" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$source_dir" && git ls-files -z --cached --others --exclude-standard |
    tar --null -T - -cf -) | tar -xf - -C "$user_dir/clone"
else
  cp -a "$source_dir/." "$user_dir/clone/"
  rm -rf "$user_dir/clone"/build* "$user_dir/clone"/.venv*
fi
if [[ -d $wheelhouse ]]; then
  # pip then takes every package from these files and asks no index.
  cp -a "$wheelhouse" "$user_dir/wheelhouse"
  export PIP_NO_INDEX=1 PIP_FIND_LINKS=$user_dir/wheelhouse
  echo "packages: $wheelhouse ($(ls "$wheelhouse" | wc -l) files, from PyPI)"
fi
chown -R "$test_uid:$test_gid" "$user_dir"

# What the namespace hides: Debian's development packages and compilers.
hidden_dirs=()
for dir in /usr/include/boost /usr/include/nlohmann /usr/include/yaml-cpp /usr/include/catch2 \
  /usr/include/gloo \
  /usr/lib/x86_64-linux-gnu/cmake/Boost-* /usr/lib/x86_64-linux-gnu/cmake/boost_* \
  /usr/lib/x86_64-linux-gnu/cmake/yaml-cpp /usr/share/cmake/nlohmann_json /usr/lib/cmake/Catch2; do
  [[ -d $dir ]] && hidden_dirs+=("$dir")
done
hidden_files=()
for file in /usr/lib/x86_64-linux-gnu/libboost_* /usr/lib/x86_64-linux-gnu/libyaml-cpp*; do
  [[ -f $file ]] && hidden_files+=("$file")
done
hidden_compilers=()
for tool in gcc g++ cc c++ clang clang++ ld; do
  if path=$(command -v "$tool"); then
    hidden_compilers+=("$(readlink -f "$path")")
  fi
done

# Runs as the test user inside the namespace. pip reads the machine's configuration
# (/etc/pip.conf, PIP_* variables) and nothing of root's.
cat >"$work/as_user_wheel.sh" <<'USER_SCRIPT'
set -euo pipefail
cd "$WORK"
echo "== as $(id -un), $(${PYTHON} --version)"
for header in /usr/include/boost/version.hpp /usr/include/nlohmann/json.hpp; do
  [[ ! -e $header ]] || { echo "FAIL: $header is not hidden" >&2; exit 1; }
done
! command -v g++ >/dev/null || ! g++ --version >/dev/null 2>&1 ||
  { echo "FAIL: g++ is not hidden" >&2; exit 1; }

echo "== 1. pip wheel of the clone (build requirements from the package index only)"
"$PYTHON" -m venv "$WORK/build-venv"
"$WORK/build-venv/bin/pip" wheel --no-deps --wheel-dir "$WORK/dist" "$WORK/clone"
wheels=("$WORK"/dist/ddprun-*.whl)
[[ ${#wheels[@]} -eq 1 && -f ${wheels[0]} ]] || { echo "FAIL: no ddprun wheel" >&2; exit 1; }
echo "wheel: $(basename "${wheels[0]}") ($(du -k "${wheels[0]}" | cut -f1) KiB)"

echo "== 2. a fresh environment, the wheel and its dependencies installed, its programs run"
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet "${wheels[0]}"
"$WORK/venv/bin/ddprun" --help | sed -n 1p
"$WORK/venv/bin/ddprun" --version
"$WORK/venv/bin/ddprun-store" --help | sed -n 1p
"$WORK/venv/bin/ddprun" --standalone --nproc-per-node 2 --log-dir "$WORK/logs" --no-python \
  sh -c 'echo "worker $RANK of $WORLD_SIZE"' >"$WORK/job.out"
grep -q "worker 0 of 2" "$WORK/job.out" && grep -q "worker 1 of 2" "$WORK/job.out" ||
  { echo "FAIL: the standalone job's workers did not both run:" >&2; cat "$WORK/job.out" >&2; exit 1; }
echo "standalone job: both workers ran"

echo "== 3. auditwheel show"
"$PYTHON" -m venv "$WORK/audit-venv"
"$WORK/audit-venv/bin/pip" install --quiet auditwheel
"$WORK/audit-venv/bin/auditwheel" show "${wheels[0]}" | tee "$WORK/auditwheel.txt"
USER_SCRIPT

cat >"$work/as_user_train.sh" <<'USER_SCRIPT'
set -euo pipefail
cd "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
ddprun=$WORK/venv/bin/ddprun
cache=$HOME/.cache/ddprun
[[ -z $(find /usr/include/yaml-cpp /usr/include/nlohmann /usr/include/gloo -mindepth 1 \
  -print -quit 2>/dev/null) ]] ||
  fail "Debian's yaml-cpp, nlohmann or Gloo headers are not hidden"
no_trainer_anywhere() {
  local found
  found=$(find "$WORK/venv/bin" "$cache" -name 'ddprun-train*' 2>/dev/null || true)
  [[ -z $found ]] || fail "a failed build left $found"
}
# refused NAME EXPECTED [VAR=VALUE...]: `ddprun ... train` fails with one error naming EXPECTED.
refused() {
  local name=$1 expected=$2 status=0
  shift 2
  env "$@" "$ddprun" --standalone --nproc-per-node 2 train >"$WORK/refused.out" 2>&1 || status=$?
  ((status != 0)) || fail "$name: ddprun exited 0"
  grep -q -- "$expected" "$WORK/refused.out" ||
    { cat "$WORK/refused.out" >&2; fail "$name: no \"$expected\" in the output"; }
  grep -q "rendezvous" "$WORK/refused.out" && fail "$name: the job started anyway"
  no_trainer_anywhere
  echo "$name: exit $status, $(grep -m1 'error:' "$WORK/refused.out" | cut -c1-160)..."
}

echo "== 4. ddprun ... train, where ddprun-train cannot be built"
refused "no torch" "has no torch"
"$WORK/venv/bin/pip" install --quiet --no-compile torch==2.13.0
refused "torch 1.13" "outside the range ddprun-train supports (2.13 to 2.14)" \
  PYTHON_EXEC=/usr/bin/python3
refused "no compiler" "the C++ compiler /nonexistent/g++ does not run" CXX=/nonexistent/g++
refused "unwritable cache" "is not writable" DDPRUN_CACHE_DIR="$ROOT_CACHE/ddprun"

echo "== 5. two jobs at once: one builds ddprun-train against torch 2.13, the other waits"
mkdir -p "$WORK/job-a" "$WORK/job-b"
started=$(date +%s)
(cd "$WORK/job-a" && exec "$ddprun" --standalone --nproc-per-node 2 train >out 2>&1) &
job_a=$!
(cd "$WORK/job-b" && exec "$ddprun" --standalone --nproc-per-node 2 train \
  trainer_config.max_epochs=1 >out 2>&1) &
job_b=$!
status_a=0 status_b=0
wait "$job_a" || status_a=$?
wait "$job_b" || status_b=$?
echo "both jobs ended after $(($(date +%s) - started)) s (exit $status_a and $status_b)"
for job in a b; do
  echo "-- job $job, its last lines:"
  tail -4 "$WORK/job-$job/out"
done
((status_a == 0 && status_b == 0)) || { cat "$WORK"/job-?/out >&2; fail "a job failed"; }
builds=$(cat "$WORK"/job-?/out | grep -c "building ddprun-train against torch 2.13.0+cpu" || true)
waits=$(cat "$WORK"/job-?/out | grep -c "which is building ddprun-train" || true)
((builds == 1 && waits == 1)) ||
  fail "expected one build and one wait, got $builds build(s) and $waits wait(s)"
grep -h "which is building ddprun-train\|built ddprun-train in" "$WORK"/job-?/out
grep -q "done: 4 epochs" "$WORK/job-a/out" || fail "job a did not train its 4 epochs"
grep -q "done: 1 epochs" "$WORK/job-b/out" || fail "job b did not train its epoch"
trainers=$(find "$cache/trainers" -name ddprun-train)
[[ $(wc -l <<<"$trainers") -eq 1 ]] || fail "not one trainer in the cache: $trainers"
echo "cached: $trainers"
USER_SCRIPT

# As root inside a namespace: hide $HIDDEN_DIRS and $HIDDEN_FILES, then run the user script $1
# as the test user with a clean environment.
cat >"$work/in_namespace.sh" <<'NS_SCRIPT'
set -euo pipefail
for dir in $HIDDEN_DIRS; do mount --bind "$ROOT_WORK/hidden-dir" "$dir"; done
for file in $HIDDEN_FILES; do mount --bind "$ROOT_WORK/hidden-file" "$file"; done
keep=()
while IFS='=' read -r name _; do
  [[ $name == PIP_* || $name == http_proxy || $name == https_proxy || $name == no_proxy ||
     $name == HTTP_PROXY || $name == HTTPS_PROXY || $name == NO_PROXY ]] && keep+=("$name=${!name}")
done < <(env)
exec setpriv --reuid="$TEST_UID" --regid="$TEST_GID" --clear-groups \
  env -i "${keep[@]}" HOME="$WORK/home" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
  WORK="$WORK" PYTHON="$PYTHON" CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" TMPDIR="$WORK/home" \
  ROOT_CACHE="$ROOT_WORK/root-cache" bash "$ROOT_WORK/$1"
NS_SCRIPT

export ROOT_WORK=$work WORK=$user_dir PYTHON=$python TEST_UID=$test_uid TEST_GID=$test_gid
export JOBS=${JOBS:-$(nproc)}
export HIDDEN_DIRS="${hidden_dirs[*]}"
echo "hidden: ${hidden_dirs[*]} ${hidden_files[*]}; for the wheel also ${hidden_compilers[*]}"
HIDDEN_FILES="${hidden_files[*]} ${hidden_compilers[*]}" \
  unshare --mount --propagation private bash "$work/in_namespace.sh" as_user_wheel.sh ||
  fail "the non-root pip build or install failed (output above)"
HIDDEN_FILES="${hidden_files[*]}" \
  unshare --mount --propagation private bash "$work/in_namespace.sh" as_user_train.sh ||
  fail "ddprun ... train from the pip installation failed (output above)"

echo "== 6. the policy and the binaries, checked as root"
wheel=$(ls "$user_dir"/dist/ddprun-*.whl)
# auditwheel wraps its lines: read the report as one line.
policy=$(tr -s '\n' ' ' <"$user_dir/auditwheel.txt" |
  sed -n 's/.*consistent with the following platform tag: "\([^"]*\)".*/\1/p')
[[ $policy =~ ^manylinux_([0-9]+)_([0-9]+)_x86_64$ ]] ||
  fail "auditwheel show gave no manylinux tag (\"$policy\")"
((BASH_REMATCH[1] == 2 && BASH_REMATCH[2] <= 28)) || fail "policy $policy is newer than manylinux_2_28"
[[ $(basename "$wheel") == *-py3-none-manylinux_2_28_x86_64.whl ]] ||
  fail "the wheel is not named manylinux_2_28: $(basename "$wheel")"
for program in ddprun ddprun-store; do
  binary=$user_dir/venv/bin/$program
  needed=$(readelf -d "$binary" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  for lib in $needed; do
    [[ $lib =~ ^(libc|libm|libpthread|libdl|librt)\.so\.[0-9]+$|^ld-linux-x86-64\.so\.2$ ]] ||
      fail "$program needs $lib (only libc, libm, libpthread, libdl, librt allowed)"
  done
  newest=$(objdump -T "$binary" | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1)
  [[ $(printf '%s\n' "$newest" GLIBC_2.28 | sort -V | tail -1) == GLIBC_2.28 ]] ||
    fail "$program needs $newest (> GLIBC_2.28)"
  echo "$program: needs $needed; newest glibc symbol $newest"
done
echo "PASS: $(basename "$wheel") is $policy; installed and ran as $test_user from PyPI alone," \
  "and built ddprun-train against the environment's torch on first use"
