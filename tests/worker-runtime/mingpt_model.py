"""minGPT-ddp's model (pytorch/examples distributed/minGPT-ddp/mingpt/model.py) in PyTorch, with
the same module names and initialisation, but causal: the example's float mask of ones is added
to the attention logits and masks nothing, so here the same `mask` buffer is turned into a
boolean "future" mask. ddprun-train's snapshots load into this module with strict=True; the
trainer benchmarks (bench/train, bench/goodput) train it with DistributedDataParallel, on
CharDataset below (minGPT-ddp's char_dataset.py: the sorted characters as the vocabulary, a
sample per starting offset).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class EmbeddingStem(nn.Module):
    def __init__(self, vocab_size, block_size, n_embd, embd_pdrop):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Parameter(torch.zeros(1, block_size, n_embd))
        self.drop = nn.Dropout(embd_pdrop)
        self.block_size = block_size

    def forward(self, idx):
        t = idx.size(1)
        assert t <= self.block_size
        return self.drop(self.tok_emb(idx) + self.pos_emb[:, :t, :])


class MultiheadAttentionLayer(nn.Module):
    def __init__(self, block_size, n_embd, n_head, attn_pdrop, resid_pdrop):
        super().__init__()
        self.attn = nn.MultiheadAttention(n_embd, n_head, dropout=attn_pdrop, batch_first=True)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.resid_drop = nn.Dropout(resid_pdrop)
        self.register_buffer(
            "mask", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        t = x.size(1)
        future = self.mask[0, 0, :t, :t] == 0
        y = self.attn(x, x, x, attn_mask=future, need_weights=False)[0]
        return self.resid_drop(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, block_size, n_embd, n_head, attn_pdrop, resid_pdrop):
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.ln2 = nn.LayerNorm(n_embd)
        self.attn = MultiheadAttentionLayer(block_size, n_embd, n_head, attn_pdrop, resid_pdrop)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(),
                                 nn.Linear(4 * n_embd, n_embd), nn.Dropout(resid_pdrop))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd,
                 embd_pdrop=0.1, resid_pdrop=0.1, attn_pdrop=0.1):
        super().__init__()
        self.emb_stem = EmbeddingStem(vocab_size, block_size, n_embd, embd_pdrop)
        self.blocks = nn.Sequential(*[Block(block_size, n_embd, n_head, attn_pdrop, resid_pdrop)
                                      for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                p.data.normal_(mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.LayerNorm):
            module.bias.data.zero_()
            module.weight.data.fill_(1.0)

    def forward(self, idx, targets=None):
        logits = self.head(self.ln_f(self.blocks(self.emb_stem(idx))))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        return logits, loss


def create_optimizer(model, learning_rate=3e-4, weight_decay=0.1, fused=None):
    """minGPT-ddp's create_optimizer: Linear and in_proj weights decay, the rest does not.
    fused: AdamW's own argument (None: PyTorch's default, as the example)."""
    decay, no_decay = set(), set()
    for mn, m in model.named_modules():
        for pn, _ in m.named_parameters(recurse=False):
            fpn = f"{mn}.{pn}" if mn else pn
            if pn.endswith("bias"):
                no_decay.add(fpn)
            elif pn.endswith("weight") and isinstance(m, nn.Linear):
                decay.add(fpn)
            elif pn.endswith("in_proj_weight"):
                decay.add(fpn)
            else:
                no_decay.add(fpn)
    params = dict(model.named_parameters())
    assert not decay & no_decay and decay | no_decay == set(params)
    groups = [
        {"params": [params[n] for n in sorted(decay)], "weight_decay": weight_decay},
        {"params": [params[n] for n in sorted(no_decay)], "weight_decay": 0.0},
    ]
    extra = {} if fused is None else {"fused": fused}  # PyTorch 1.13's AdamW has no `fused`
    return torch.optim.AdamW(groups, lr=learning_rate, betas=(0.9, 0.95), **extra)


class CharDataset(Dataset):
    def __init__(self, text, block):
        chars = sorted(set(text))
        index = {c: i for i, c in enumerate(chars)}
        self.vocab = len(chars)
        self.data = torch.tensor([index[c] for c in text], dtype=torch.long)
        self.block = block

    def __len__(self):
        return len(self.data) - self.block

    def __getitem__(self, i):
        chunk = self.data[i:i + self.block + 1]
        return chunk[:-1], chunk[1:]


def char_training_loader(text, block, batch, seed):
    """The benchmarks' training data: CharDataset over text, a seeded 90 % split, sharded by a
    DistributedSampler; returns (dataset, sampler, loader)."""
    dataset = CharDataset(text, block)
    n_train = int(len(dataset) * 0.9)
    train, _ = torch.utils.data.random_split(dataset, [n_train, len(dataset) - n_train],
                                             torch.Generator().manual_seed(seed))
    sampler = DistributedSampler(train, seed=seed)
    return dataset, sampler, DataLoader(train, batch_size=batch, sampler=sampler, num_workers=0)
