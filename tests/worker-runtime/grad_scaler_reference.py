"""The reference for ddprun-train's fp16 loss scaler: torch.amp.GradScaler("cpu") with
growth_interval 3 and AdamW(fused=True), over a fixed sequence of gradients (those of
sum(p * g)) of which some hold an inf, used as GradScaler's documentation says for clipping (unscale_, step, update).
Prints one JSON line first with the initial parameters, then one per step: the gradients g it
used, the scale and growth tracker after update(), and the parameters after the step."""
import json
import math

import torch

STEPS = 12
INF_STEPS = {2, 5, 6}


def values(t):
    return [v if math.isfinite(v) else "inf" for v in t.flatten().tolist()]


def main():
    params = [torch.tensor([(i % 5 - 2) * 0.1 for i in range(12)]).view(3, 4).requires_grad_(),
              torch.tensor([(i % 3 - 1) * 0.3 for i in range(5)]).requires_grad_()]
    optimizer = torch.optim.AdamW(params, lr=0.01, betas=(0.9, 0.95), eps=1e-8,
                                  weight_decay=0.1, fused=True)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16, growth_interval=3)
    print(json.dumps({"params": [values(p.detach()) for p in params]}))
    for step in range(STEPS):
        grads = [torch.tensor([((i * 7 + step * 3) % 11 - 5) * 0.25 for i in range(p.numel())])
                 .view(p.shape) for p in params]
        if step in INF_STEPS:
            grads[0].view(-1)[0] = math.inf
        optimizer.zero_grad()
        loss = sum((p * g).sum() for p, g in zip(params, grads))  # d loss / d p = g
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()
        print(json.dumps({"grads": [values(g) for g in grads], "scale": scaler.get_scale(),
                          "tracker": int(scaler._growth_tracker.item()),
                          "params": [values(p.detach()) for p in params]}))


if __name__ == "__main__":
    main()
