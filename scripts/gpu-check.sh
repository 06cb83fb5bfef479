#!/usr/bin/env bash
# The GPU check: on one GPU machine, in a few minutes, builds ddprun-train against that machine's
# PyTorch (CUDA, NCCL) and trains it for one rank on cuda:0 through ProcessGroupNCCL beside
# bench/train's Python trainer (PyTorch DDP over NCCL), all under that machine's torchrun, on the
# same data: (i) minGPT-ddp's own configuration with use_amp against the example's trainer logic;
# (ii) GPT-2 small's shape in bf16 at batch 16 and 64 against PyTorch's best eager and
# torch.compile; (iii) what a snapshot every 10 steps costs a step. Prints tokens/s, MFU and peak
# memory of each, and the ratios.
#
#   scripts/gpu-check.sh --prepare   On the project machine (scripts/install-deps.sh runs it):
#                                    copies into .gpu-deps/ what a GPU machine's image lacks, from
#                                    Debian's packages: yaml-cpp's headers and library and
#                                    nlohmann_json's headers, with their CMake files.
#   scripts/gpu-check.sh             On the GPU machine, with .gpu-deps/ carried along. Needs
#                                    python3 with a CUDA build of torch, CMake, ninja or make, nvcc
#                                    and a C++20 g++; no network.
# Environment: PYTHON (default python3: the one holding the machine's torch), STEPS (training
# steps of each run, default 40), SHAPE (block,n_layer,n_head,n_embd of (ii); default
# 1024,12,12,768: GPT-2 small's depth, width and context), GPT2_BATCHES (default "16 64"),
# MINGPT_SHAPE (default 128,8,8,512,216), BUILD (default build-gpu), DDPRUN_GPU_CHECK_ALLOW_CPU=1
# (run without a GPU, on Gloo: only for testing this script on a machine that has none).
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
  cp -r /usr/include/yaml-cpp /usr/include/nlohmann "$deps/include/"
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
steps=${STEPS:-40}
IFS=, read -r block n_layer n_head n_embd <<<"${SHAPE:-1024,12,12,768}"
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
build=${BUILD:-build-gpu}
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

# 2. The same data for every run: the default corpus's generator at tinyshakespeare's size, of
# which every trainer keeps the first 5%.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" worker-runtime/data/generate_corpus.py --chars 1115394 --output "$work/corpus.txt"
torchrun=("$python" -m torch.distributed.run --standalone --nproc_per_node 1)
backend=NCCL
[[ $gpus -gt 0 ]] || backend="CPU, no GPU"

# ddprun SHAPE PRECISION USE_AMP [SETTING...]: ddprun-train, 1 rank; prints "tokens/s peak_bytes
# precision stall_seconds", tokens/s being the median of its log windows after the first (warm-up)
# and stall_seconds the median a step paid for a snapshot taken inside the epoch (0: none taken).
ddprun() {
  local block n_layer n_head n_embd batch
  IFS=, read -r block n_layer n_head n_embd batch <<<"$1"
  rm -f "$work/snapshot.pt" "$work/metrics.jsonl"
  (cd "$work" && "${torchrun[@]}" --no_python "$root/$build/bin/ddprun-train" \
    data_config.path="$work/corpus.txt" data_config.truncate=0.05 data_config.block_size="$block" \
    gpt_config.n_layer="$n_layer" gpt_config.n_head="$n_head" gpt_config.n_embd="$n_embd" \
    trainer_config.batch_size="$batch" trainer_config.steps_per_epoch="$steps" \
    trainer_config.max_epochs=1 trainer_config.eval_batches=1 trainer_config.log_every=$log_every \
    trainer_config.seed=$seed trainer_config.snapshot_path="$work/snapshot.pt" \
    trainer_config.precision="$2" trainer_config.use_amp="$3" \
    optimizer_config.learning_rate=0.003 "${@:4}" --metrics "$work/metrics.jsonl") >"$work/ours.log" 2>&1 ||
    { cat "$work/ours.log" >&2; die "ddprun-train failed ($1, $2)"; }
  if [[ $gpus -gt 0 ]] && ! grep -q "rank(s) on cuda:0 (collectives: nccl)" "$work/ours.log"; then
    die "ddprun-train did not train on cuda:0 through NCCL"
  fi
  "$python" -c '
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
rates = [r["tokens_per_second"] for r in lines if r["kind"] == "step"]
peak = max(r.get("peak_memory_bytes", 0) for r in lines)
ran = open(sys.argv[2]).read().split("ddprun-train: precision ", 1)[1].split(" ", 1)[0]
stalls = [r["stall_seconds"] for r in lines if r["kind"] == "snapshot" and r["steps_into_epoch"]]
stall = statistics.median(stalls) if stalls else 0
print(f"{statistics.median(rates[1:] or rates):.0f} {peak} {ran} {stall:.6f}")' "$work/metrics.jsonl" "$work/ours.log"
}

# reference SHAPE VARIANT PRECISION: bench/train's Python trainer (PyTorch DDP) on the same shape,
# data, batch, steps and seed; prints "tokens/s peak_bytes".
reference() {
  local block n_layer n_head n_embd batch
  IFS=, read -r block n_layer n_head n_embd batch <<<"$1"
  (cd "$work" && "${torchrun[@]}" "$root/bench/train/python_trainer.py" "$work/corpus.txt" \
    "$block" "$n_layer" "$n_head" "$n_embd" "$batch" "$steps" $log_every $seed \
    --variant "$2" --precision "$3") >"$work/python.log" 2>&1 ||
    { cat "$work/python.log" >&2; die "the Python trainer failed ($1, $2, $3)"; }
  "$python" -c '
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print("%.0f %d" % (r["tokens_per_second"], r["peak_memory_bytes"]))' "$work/python.log"
}

# row SHAPE NAME TOKENS PEAK [RATIO_TO]: one table row with MFU. FLOPs per token 6N + 12*L*d*T
# (PaLM's appendix B, nanoGPT's estimate_mfu): N the non-embedding parameters (blocks of
# minGPT-ddp's layout, 13d^2 + 14d each, final LayerNorm, head), against 989 TFLOP/s (H100/H200
# SXM dense bf16) whatever the precision, so fp32 rows read low on purpose.
row() {
  "$python" -c '
import sys
shape, name, tokens, peak = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
block, layers, heads, width, batch = map(int, shape.split(","))
vocab = 65
n = layers * (13 * width * width + 14 * width) + 2 * width + width * vocab
flops = 6 * n + 12 * layers * width * block
mfu = tokens * flops / 989e12
ratio = f"{tokens / float(sys.argv[5]):.2f}" if len(sys.argv) > 5 else ""
print(f"| {name:44} | {tokens:10.0f} | {100 * mfu:5.1f}% | {peak / 2**30:7.2f} | {ratio:>5} |")
' "$@"
}

header() {
  echo
  echo "$1"
  printf '| %-44s | %10s | %6s | %7s | %5s |\n' "trainer" "tokens/s" "MFU" "GiB" "ratio"
}

# (i) minGPT-ddp's own configuration (gpt2_train_cfg.yaml: 8 layers, 8 heads, 512 wide, block
# 128, batch 216, use_amp): ddprun-train with use_amp against the example's trainer logic
# (autocast fp16 + GradScaler, default AdamW, loss.item() every step).
mingpt=${MINGPT_SHAPE:-128,8,8,512,216}
read -r m_ours m_ours_peak m_prec _ < <(ddprun "$mingpt" auto true)
read -r m_ex m_ex_peak < <(reference "$mingpt" example fp16)
header "(i) minGPT-ddp's configuration ($mingpt as block,layers,heads,width,batch), $steps steps, $backend"
row "$mingpt" "ddprun-train, use_amp ($m_prec)" "$m_ours" "$m_ours_peak" "$m_ex"
row "$mingpt" "minGPT-ddp's trainer logic (fp16 + GradScaler)" "$m_ex" "$m_ex_peak"

# (ii) GPT-2 small's shape in bf16 at two batch sizes: ddprun-train against PyTorch's best eager
# (SDPA, fused AdamW, no per-step sync) and the same under torch.compile.
for batch in ${GPT2_BATCHES:-16 64}; do
  shape="$block,$n_layer,$n_head,$n_embd,$batch"
  read -r g_ours g_ours_peak g_prec _ < <(ddprun "$shape" bf16 false)
  read -r g_best g_best_peak < <(reference "$shape" best bf16)
  read -r g_comp g_comp_peak < <(reference "$shape" compiled bf16)
  header "(ii) GPT-2 small's shape ($shape), $steps steps, $backend; ratio: ddprun-train / that row"
  row "$shape" "ddprun-train ($g_prec)" "$g_ours" "$g_ours_peak"
  row "$shape" "PyTorch DDP best eager (bf16)" "$g_best" "$g_best_peak" "$g_ours"
  row "$shape" "PyTorch DDP torch.compile (bf16)" "$g_comp" "$g_comp_peak" "$g_ours"
done

# (iii) Snapshots every 10 steps (the state copied into pinned memory on a side stream, written by
# a thread): what a step pays, at GPT-2 small's shape and the first batch of (ii).
batch=${GPT2_BATCHES%% *}
batch=${batch:-16}
shape="$block,$n_layer,$n_head,$n_embd,$batch"
read -r s_plain s_plain_peak _ _ < <(ddprun "$shape" bf16 false)
read -r s_snap s_snap_peak _ s_stall < <(ddprun "$shape" bf16 false trainer_config.save_every_steps=10)
header "(iii) snapshots every 10 steps ($shape), $steps steps, $backend; ratio: with / without"
row "$shape" "ddprun-train, no step snapshots" "$s_plain" "$s_plain_peak"
row "$shape" "ddprun-train, a snapshot every 10 steps" "$s_snap" "$s_snap_peak" "$s_plain"
"$python" -c '
import sys
stall, tokens, tokens_per_step = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
step = tokens_per_step / tokens
print(f"snapshot stall: median {stall * 1e3:.2f} ms per snapshot, a step {step * 1e3:.1f} ms: "
      f"{100 * stall / step:.1f}% of a step")' "$s_stall" "$s_plain" "$((batch * block))"
echo
echo "GPU check: ${gpu_name//_/ }, torch $torch_version (CUDA $torch_cuda), 1 rank; tokens/s: median"
echo "of $log_every-step windows after the first; GiB: peak allocated on the device"
echo "total ${SECONDS} s (build ${build_seconds} s)"
