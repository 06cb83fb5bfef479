#!/usr/bin/env bash
# The GPU check: on one GPU machine, in a few minutes, builds ddprun-train against that machine's
# PyTorch (CUDA, NCCL), trains it for one rank on cuda:0 through ProcessGroupNCCL on a
# GPT-2-small-like shape, then trains bench/train's Python trainer (PyTorch DDP over NCCL) on the
# same shape and data, both under that machine's torchrun, and prints tokens/s of both and the
# ratio.
#
#   scripts/gpu-check.sh --prepare   On the project machine (scripts/install-deps.sh runs it):
#                                    copies into .gpu-deps/ what a GPU machine's image lacks, from
#                                    Debian's packages: yaml-cpp's headers and library,
#                                    nlohmann_json's and Gloo's headers, with their CMake files.
#   scripts/gpu-check.sh             On the GPU machine, with .gpu-deps/ carried along. Needs
#                                    python3 with a CUDA build of torch, CMake, ninja or make, nvcc
#                                    and a C++20 g++; no network.
# Environment: PYTHON (default python3: the one holding the machine's torch), STEPS (training
# steps of each trainer, default 60), SHAPE (block,n_layer,n_head,n_embd,batch per rank; default
# 1024,12,12,768,16: GPT-2 small's depth, width and context), DDPRUN_GPU_CHECK_ALLOW_CPU=1 (run
# without a GPU, on Gloo: only for testing this script on a machine that has none).
# Exit status: 0 when both trainers ran (and ddprun-train used NCCL), else 1.
set -euo pipefail
cd "$(dirname "$0")/.."
readonly root=$PWD deps=.gpu-deps

die() {
  echo "gpu-check: $*" >&2
  exit 1
}

prepare() {
  local multiarch=lib/x86_64-linux-gnu
  rm -rf "$deps"
  mkdir -p "$deps/include" "$deps/$multiarch/cmake" "$deps/share/cmake"
  cp -r /usr/include/yaml-cpp /usr/include/nlohmann /usr/include/gloo "$deps/include/"
  cp -a /usr/$multiarch/libyaml-cpp.so* "$deps/$multiarch/"
  cp -r /usr/$multiarch/cmake/yaml-cpp "$deps/$multiarch/cmake/"
  cp -r /usr/share/cmake/nlohmann_json "$deps/share/cmake/"
  echo "gpu-check: prepared $deps ($(du -sh "$deps" | cut -f1)) for a GPU machine"
}

if [[ ${1:-} == --prepare ]]; then
  prepare
  exit 0
fi
[[ $# -eq 0 ]] || die "usage: scripts/gpu-check.sh [--prepare]"
[[ -d $deps ]] || die "$deps is missing: run scripts/gpu-check.sh --prepare on the project machine and carry $deps along"

python=$(command -v "${PYTHON:-python3}") || die "no ${PYTHON:-python3}"
steps=${STEPS:-60}
IFS=, read -r block n_layer n_head n_embd batch <<<"${SHAPE:-1024,12,12,768,16}"
readonly log_every=10 seed=1337
start=$SECONDS

read -r torch_version torch_cuda gpus gpu_name < <("$python" -c '
import torch
n = torch.cuda.device_count() if torch.cuda.is_available() else 0
print(torch.__version__, torch.version.cuda, n, torch.cuda.get_device_name(0).replace(" ", "_") if n else "none")')
if [[ $gpus -eq 0 && ${DDPRUN_GPU_CHECK_ALLOW_CPU:-0} != 1 ]]; then
  die "torch $torch_version sees no GPU"
fi
echo "gpu-check: torch $torch_version (CUDA $torch_cuda), $gpus GPU(s): ${gpu_name//_/ }"

# 1. Build ddprun-train against this torch (only the trainer: no Boost or Catch2 here). Warnings
# stay warnings: this machine's compiler is not the one the project is developed with.
build=build-gpu
mkdir -p "$build"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DDDPRUN_TRAINER_ONLY=ON \
  -DDDPRUN_WERROR=OFF -DDDPRUN_TORCH_PYTHON="$python" -DCMAKE_PREFIX_PATH="$PWD/$deps" \
  -Dyaml-cpp_DIR="$PWD/$deps/lib/x86_64-linux-gnu/cmake/yaml-cpp" \
  -Dnlohmann_json_DIR="$PWD/$deps/share/cmake/nlohmann_json" >"$build/configure.log" 2>&1 ||
  { tail -40 "$build/configure.log"; die "configure failed (log: $build/configure.log)"; }
cmake --build "$build" --target ddprun-train -j "$(nproc)" >"$build/build.log" 2>&1 ||
  { tail -40 "$build/build.log"; die "build failed (log: $build/build.log)"; }
build_seconds=$((SECONDS - start))
echo "gpu-check: built $build/bin/ddprun-train in ${build_seconds} s"

# 2. The same data for both: the default corpus's generator at tinyshakespeare's size, of which
# both trainers keep the first 5%.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" worker-runtime/data/generate_corpus.py --chars 1115394 --output "$work/corpus.txt"
torchrun=("$python" -m torch.distributed.run --standalone --nproc_per_node 1)

# 3. ddprun-train, 1 rank; tokens/s is the median of its log windows after the first (warm-up).
(cd "$work" && "${torchrun[@]}" --no_python "$root/$build/bin/ddprun-train" \
  data_config.path="$work/corpus.txt" data_config.truncate=0.05 data_config.block_size="$block" \
  gpt_config.n_layer="$n_layer" gpt_config.n_head="$n_head" gpt_config.n_embd="$n_embd" \
  trainer_config.batch_size="$batch" trainer_config.steps_per_epoch="$steps" \
  trainer_config.max_epochs=1 trainer_config.eval_batches=1 trainer_config.log_every=$log_every \
  trainer_config.seed=$seed trainer_config.snapshot_path="$work/snapshot.pt" \
  optimizer_config.learning_rate=0.003 --metrics "$work/metrics.jsonl") >"$work/ours.log" 2>&1 ||
  { cat "$work/ours.log"; die "ddprun-train failed"; }
grep -m1 "rank(s) on" "$work/ours.log"
if [[ $gpus -gt 0 ]] && ! grep -q "rank(s) on cuda:0 (collectives: nccl)" "$work/ours.log"; then
  die "ddprun-train did not train on cuda:0 through NCCL"
fi
ours=$("$python" -c '
import json, statistics, sys
rates = [r["tokens_per_second"] for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "step"]
print(f"{statistics.median(rates[1:] or rates):.0f}")' "$work/metrics.jsonl")

# 4. bench/train's Python trainer on the same shape, data, batch, steps and seed.
(cd "$work" && "${torchrun[@]}" "$root/bench/train/python_trainer.py" "$work/corpus.txt" \
  "$block" "$n_layer" "$n_head" "$n_embd" "$batch" "$steps" $log_every $seed) \
  >"$work/python.log" 2>&1 || { cat "$work/python.log"; die "the Python trainer failed"; }
theirs=$("$python" -c '
import json, sys
rate = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["tokens_per_second"]
print(f"{rate:.0f}")' "$work/python.log")

echo
echo "GPU check: ${gpu_name//_/ }, torch $torch_version (CUDA $torch_cuda), 1 rank"
echo "shape: $n_layer layers x $n_embd wide, $n_head heads, block $block, batch $batch," \
  "$steps steps, fp32, median tokens/s of $log_every-step windows after the first"
backend=NCCL
[[ $gpus -gt 0 ]] || backend="CPU, no GPU"
printf '| %-40s | %12s |\n' "trainer" "tokens/s" "ddprun-train (LibTorch C++, $backend)" "$ours" \
  "python_trainer.py (PyTorch DDP, $backend)" "$theirs"
printf '| %-40s | %12s |\n' "ratio ddprun-train / PyTorch" \
  "$("$python" -c "print(f'{$ours / $theirs:.2f}')")"
echo "total ${SECONDS} s (build ${build_seconds} s)"
