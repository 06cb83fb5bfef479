"""The reference of bench/goodput: minGPT (the causal PyTorch module of tests/worker-runtime) trained
with DistributedDataParallel and minGPT-ddp's snapshot logic, run by torchrun:
  - at start, every rank loads the snapshot when the file exists (model, optimizer, finished_epoch)
    and goes on at epoch finished_epoch + 1 (the example knows no position inside an epoch);
  - after every save_every-th epoch, global rank 0 writes it with a plain torch.save (the example
    writes from local rank 0 of every node; multinode.py, since pytorch/examples#1357, from global
    rank 0, which is what a shared folder needs).
It prints ddprun-train's progress lines (`epoch E/M | iter I/N | train loss L`) and its resume line,
so that the harness reads both trainers alike, and `snapshot: saved in X s` (the step's stall).
usage: mingpt_trainer.py DATA BLOCK N_LAYER N_HEAD N_EMBD BATCH STEPS_PER_EPOCH MAX_EPOCHS
                         SAVE_EVERY SNAPSHOT SEED"""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "worker-runtime"))
from mingpt_model import GPT, char_training_loader, create_optimizer  # noqa: E402


def main():
    path, *numbers, snapshot, seed = sys.argv[1:]
    block, n_layer, n_head, n_embd, batch, steps, max_epochs, save_every = map(int, numbers)
    seed = int(seed)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    text = open(path, encoding="utf-8").read()
    dataset, sampler, loader = char_training_loader(text, block, batch, seed)
    torch.manual_seed(seed + rank)
    model = GPT(dataset.vocab, block, n_layer, n_head, n_embd)
    optimizer = create_optimizer(model, learning_rate=3e-3)
    epochs_run = 0
    if os.path.exists(snapshot):
        start = time.perf_counter()
        data = torch.load(snapshot, map_location="cpu")
        model.load_state_dict(data["model_state"])
        optimizer.load_state_dict(data["optimizer_state"])
        epochs_run = data["finished_epoch"]
        if rank == 0:
            print(f"resumed from {snapshot}: finished epoch {epochs_run}, 0 steps into the next "
                  f"(loaded in {time.perf_counter() - start:.3f} s)", flush=True)
    model = DDP(model)
    for epoch in range(epochs_run + 1, max_epochs + 1):
        sampler.set_epoch(epoch)
        for step, (x, y) in enumerate(loader):
            if step == steps:
                break
            _, loss = model(x, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            value = loss.item()  # as the example: the host syncs every step
            if rank == 0:
                print(f"epoch {epoch}/{max_epochs} | iter {step + 1}/{steps} | "
                      f"train loss {value:.4f}", flush=True)
        if rank == 0 and epoch % save_every == 0:
            start = time.perf_counter()
            torch.save({"model_state": model.module.state_dict(),
                        "optimizer_state": optimizer.state_dict(),
                        "finished_epoch": epoch}, snapshot)
            print(f"snapshot: saved in {time.perf_counter() - start:.3f} s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
