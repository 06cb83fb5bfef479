"""minGPT-ddp's snapshot code, restated for the tests: the Snapshot dataclass, _save_snapshot
(dataclasses.asdict, then torch.save to the path) and _load_snapshot (torch.load with
map_location="cpu", Snapshot(**data), strict load_state_dict, AdamW.load_state_dict), as in
pytorch/examples distributed/minGPT-ddp/mingpt/trainer.py. Runs with any PyTorch from 1.13 on
(the tests use .venv's 2.13 and Debian's 1.13).

  mingpt_snapshot.py save PATH --corpus FILE --truncate T --block B --layers L --heads H
                     --embd E --lr LR --epoch N
      Builds the PyTorch minGPT over the vocabulary minGPT-ddp's CharDataset takes from FILE,
      takes two AdamW steps at LR and saves the snapshot with finished_epoch=N.
  mingpt_snapshot.py load PATH --layers L --heads H --embd E [--epoch N] [--lr LR] [--steps S]
                     [--compare OTHER --max-change D]
      Loads PATH as minGPT-ddp does, checks what is asked, takes one more step, prints "OK ...".
      --compare: every model tensor is within D of OTHER's (a snapshot loaded the same way).
Exits non-zero with a traceback on any failure.
"""
import argparse
import math
import sys
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any, Dict

import torch

from mingpt_model import GPT, create_optimizer


@dataclass
class Snapshot:
    model_state: "OrderedDict[str, torch.Tensor]"
    optimizer_state: Dict[str, Any]
    finished_epoch: int


def save_snapshot(model, optimizer, epoch, path):
    """_save_snapshot: the raw module's state_dict (an OrderedDict) and the optimizer's."""
    snapshot = Snapshot(model_state=model.state_dict(), optimizer_state=optimizer.state_dict(),
                        finished_epoch=epoch)
    torch.save(asdict(snapshot), path)


def load_snapshot(model, optimizer, path):
    """_load_snapshot: returns the finished epoch. Snapshot(**data) rejects any other key."""
    with open(path, "rb") as f:
        snapshot_data = torch.load(f, map_location="cpu")
    snapshot = Snapshot(**snapshot_data)
    model.load_state_dict(snapshot.model_state)  # strict=True, the default
    optimizer.load_state_dict(snapshot.optimizer_state)
    return snapshot.finished_epoch


def vocabulary_size(corpus, truncate):
    """CharDataset: the sorted characters of the first int(len * truncate) characters."""
    with open(corpus, encoding="utf-8") as f:
        data = f.read()
    return len(set(data[:int(len(data) * truncate)]))


def one_step(model, optimizer, vocab_size, block_size, seed):
    torch.manual_seed(seed)
    idx = torch.randint(vocab_size, (2, block_size))
    _, loss = model(idx, idx)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss.item()


def save(args):
    vocab_size = vocabulary_size(args.corpus, args.truncate)
    torch.manual_seed(0)
    model = GPT(vocab_size, args.block, args.layers, args.heads, args.embd)
    optimizer = create_optimizer(model, learning_rate=args.lr)
    for seed in (1, 2):
        one_step(model, optimizer, vocab_size, args.block, seed)
    save_snapshot(model, optimizer, args.epoch, args.path)
    print(f"OK saved {args.path}: torch {torch.__version__}, vocab {vocab_size}, "
          f"finished_epoch={args.epoch}, lr={args.lr}")


def model_for(path, layers, heads, embd):
    """A fresh module of the snapshot's vocabulary and block size, with its optimizer."""
    with open(path, "rb") as f:
        state = torch.load(f, map_location="cpu")["model_state"]
    vocab_size, _ = state["emb_stem.tok_emb.weight"].shape
    block_size = state["emb_stem.pos_emb"].shape[1]
    model = GPT(vocab_size, block_size, layers, heads, embd)
    return model, create_optimizer(model), vocab_size, block_size


def load(args):
    model, optimizer, vocab_size, block_size = model_for(args.path, args.layers, args.heads,
                                                         args.embd)
    epoch = load_snapshot(model, optimizer, args.path)
    if args.epoch is not None:
        assert epoch == args.epoch, f"finished_epoch {epoch}, expected {args.epoch}"
    steps = sorted({float(optimizer.state[p]["step"])
                    for g in optimizer.param_groups for p in g["params"]})
    for group in optimizer.param_groups:
        assert group["betas"] == (0.9, 0.95), group["betas"]
        if args.lr is not None:
            assert math.isclose(group["lr"], args.lr, rel_tol=1e-9), f"lr {group['lr']}"
        for p in group["params"]:
            s = optimizer.state[p]
            assert s["exp_avg"].shape == p.shape and s["exp_avg_sq"].shape == p.shape
    if args.steps is not None:
        assert steps == [float(args.steps)], f"optimizer steps {steps}, expected {args.steps}"
    change = None
    if args.compare:
        other, other_optimizer, _, _ = model_for(args.compare, args.layers, args.heads, args.embd)
        load_snapshot(other, other_optimizer, args.compare)
        theirs = other.state_dict()
        change = max((t - theirs[name]).abs().max().item()
                     for name, t in model.state_dict().items())
        assert change <= args.max_change, f"weights moved by {change} > {args.max_change}"
    loss = one_step(model, optimizer, vocab_size, block_size, 3)
    print(f"OK loaded {args.path}: torch {torch.__version__}, finished_epoch={epoch}, "
          f"params={len(model.state_dict())}, steps={steps}, lr={optimizer.param_groups[0]['lr']}, "
          f"change={change}, loss={loss:.4f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("action", choices=["save", "load"])
    parser.add_argument("path")
    parser.add_argument("--corpus")
    parser.add_argument("--truncate", type=float, default=1.0)
    parser.add_argument("--block", type=int)
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--embd", type=int, required=True)
    parser.add_argument("--lr", type=float)
    parser.add_argument("--epoch", type=int)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--compare")
    parser.add_argument("--max-change", type=float, default=0.0)
    args = parser.parse_args()
    if args.action == "save":
        save(args)
    else:
        load(args)


if __name__ == "__main__":
    sys.exit(main())
