"""minGPT's GPT.generate() (karpathy/minGPT mingpt/model.py) in PyTorch, on a snapshot loaded as
minGPT-ddp loads one: the reference for `ddprun-train sample`. Prints the prompt and the
generated text.

usage: mingpt_generate.py SNAPSHOT --corpus FILE --truncate T --block B --layers L --heads H
                          --embd E --prompt TEXT --tokens N [--temperature T] [--top-k K]
Greedy only (do_sample=False): sampled draws depend on the generator, not on the model."""
import argparse

import torch
from torch.nn import functional as F

from mingpt_model import GPT


@torch.no_grad()
def generate(model, idx, max_new_tokens, block_size, temperature=1.0, top_k=None):
    """minGPT's generate with do_sample=False."""
    for _ in range(max_new_tokens):
        idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
        logits, _ = model(idx_cond)
        logits = logits[:, -1, :] / temperature
        if top_k is not None:
            v, _ = torch.topk(logits, top_k)
            logits[logits < v[:, [-1]]] = -float("Inf")
        probs = F.softmax(logits, dim=-1)
        _, idx_next = torch.topk(probs, k=1, dim=-1)
        idx = torch.cat((idx, idx_next), dim=1)
    return idx


def main():
    p = argparse.ArgumentParser()
    p.add_argument("snapshot")
    p.add_argument("--corpus", required=True)
    p.add_argument("--truncate", type=float, required=True)
    for name in ("block", "layers", "heads", "embd", "tokens"):
        p.add_argument(f"--{name}", type=int, required=True)
    p.add_argument("--prompt", required=True)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int)
    args = p.parse_args()
    with open(args.corpus, encoding="utf-8") as f:
        data = f.read()
    chars = sorted(set(data[:int(len(data) * args.truncate)]))  # minGPT-ddp's CharDataset
    stoi = {c: i for i, c in enumerate(chars)}
    model = GPT(len(chars), args.block, args.layers, args.heads, args.embd)
    snapshot = torch.load(args.snapshot, map_location="cpu")
    model.load_state_dict(snapshot["model_state"])
    model.eval()
    idx = torch.tensor([[stoi[c] for c in args.prompt]], dtype=torch.long)
    out = generate(model, idx, args.tokens, args.block, args.temperature, args.top_k)
    print("".join(chars[i] for i in out[0].tolist()))


if __name__ == "__main__":
    main()
