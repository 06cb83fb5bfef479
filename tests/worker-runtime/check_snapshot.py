"""Loads a ddprun-train snapshot the way minGPT-ddp does (torch.load, strict load_state_dict,
AdamW.load_state_dict) and checks that training can continue from it.
usage: check_snapshot.py SNAPSHOT N_LAYER N_HEAD N_EMBD
Prints "OK ..." and exits 0, or raises."""
import sys

import torch

from mingpt_model import GPT, create_optimizer

path, n_layer, n_head, n_embd = sys.argv[1], *map(int, sys.argv[2:5])
snapshot = torch.load(path, map_location="cpu")
assert isinstance(snapshot, dict), type(snapshot)
for key in ("model_state", "optimizer_state", "finished_epoch"):
    assert key in snapshot, key
state = snapshot["model_state"]
vocab_size, n_embd_saved = state["emb_stem.tok_emb.weight"].shape
block_size = state["emb_stem.pos_emb"].shape[1]
assert n_embd_saved == n_embd
model = GPT(vocab_size, block_size, n_layer, n_head, n_embd)
model.load_state_dict(state, strict=True)
optimizer = create_optimizer(model)
optimizer.load_state_dict(snapshot["optimizer_state"])
# The optimizer state must line up with the parameters: same shapes, steps taken.
for group in optimizer.param_groups:
    assert group["betas"] == (0.9, 0.95), group["betas"]
    for p in group["params"]:
        s = optimizer.state[p]
        assert s["exp_avg"].shape == p.shape and s["exp_avg_sq"].shape == p.shape
        assert float(s["step"]) >= 1
steps = {float(optimizer.state[p]["step"]) for g in optimizer.param_groups for p in g["params"]}
# One more step works.
idx = torch.randint(vocab_size, (2, block_size))
_, loss = model(idx, idx)
loss.backward()
optimizer.step()
print(f"OK finished_epoch={snapshot['finished_epoch']} params={len(state)} steps={sorted(steps)} "
      f"loss={loss.item():.4f}")
