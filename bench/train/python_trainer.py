"""The reference for bench/train: minGPT (the causal PyTorch module of tests/worker-runtime)
trained with torch.nn.parallel.DistributedDataParallel, the same way ddprun-train trains
(DistributedSampler, AdamW groups, clipping; Gloo on CPU, or NCCL on cuda:LOCAL_RANK when that GPU
exists, as ddprun-train chooses). Run by torchrun; prints one JSON line.
usage: python_trainer.py DATA BLOCK N_LAYER N_HEAD N_EMBD BATCH STEPS LOG_EVERY SEED
                         [--variant example|best|compiled] [--precision fp32|tf32|bf16|fp16]
Variants (the attention is scaled_dot_product_attention in all three: nn.MultiheadAttention
with need_weights=False):
  example   minGPT-ddp's trainer logic: default AdamW, loss.item() every step, and with a low
            precision its autocast and GradScaler (fp16), clipping the scaled gradients as it does
  best      PyTorch's best eager practice: AdamW(fused=True), autocast at the precision (fp16 with
            GradScaler, unscaled before clipping), the loss read only at log steps
  compiled  best, under torch.compile (compile time falls in the first window, left out)"""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "worker-runtime"))
from mingpt_model import GPT, char_training_loader, create_optimizer  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("numbers", nargs=9)
    p.add_argument("--variant", choices=("example", "best", "compiled"), default="example")
    p.add_argument("--precision", choices=("fp32", "tf32", "bf16", "fp16"), default="fp32")
    args = p.parse_args()
    path = args.numbers[0]
    block, n_layer, n_head, n_embd, batch, steps, log_every, seed = map(int, args.numbers[1:])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = torch.cuda.is_available() and local_rank < torch.cuda.device_count()
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    if use_cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if use_cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    text = open(path, encoding="utf-8").read()
    text = text[:int(len(text) * 0.05)]
    dataset, sampler, loader = char_training_loader(text, block, batch, seed)
    torch.manual_seed(seed + rank)
    model = GPT(dataset.vocab, block, n_layer, n_head, n_embd).to(device)
    best = args.variant != "example"
    optimizer = create_optimizer(model, learning_rate=3e-3, fused=best)
    if args.precision == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    scaler = torch.amp.GradScaler(device.type, enabled=args.precision == "fp16")
    model = DDP(model, device_ids=[local_rank] if use_cuda else None)
    if args.variant == "compiled":
        model = torch.compile(model)
    rates, window_start, done = [], time.perf_counter(), 0
    sampler.set_epoch(1)
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=low or torch.float32, enabled=low is not None):
            _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if best:
            scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        scaler.step(optimizer)
        scaler.update()
        if not best:
            loss.item()
        done += 1
        if done % log_every == 0:
            loss.item()
            if use_cuda:
                torch.cuda.synchronize()
            now = time.perf_counter()
            rates.append(log_every * batch * block * world / (now - window_start))
            window_start = now
        if done == steps:
            break
    if rank == 0:
        # The first window includes warm-up (allocations, DDP's bucket rebuild): leave it out.
        peak = torch.cuda.max_memory_allocated(device) if use_cuda else 0
        print(json.dumps({"tokens_per_second": statistics.median(rates[1:] or rates),
                          "windows": len(rates), "peak_memory_bytes": peak}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
