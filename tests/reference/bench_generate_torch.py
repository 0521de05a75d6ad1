"""PyTorch reference timing of cached greedy decoding of the default model.

The same architecture as xsa's GPT (tests/reference/bench_torch.py), with a
key/value cache kept the usual way (past keys and values concatenated per
layer) and the same measurement as tests/bench_generate.c: a 1-token prompt,
then 63 greedy tokens (the cache holds 1..64 positions), at batch 1 and 16;
tokens/s = B * 63 / time, median of 7 runs after a warm-up. Used only to
compare speed on the same CPU (`make bench` runs it with Debian's
/usr/bin/python3 when python3-torch is installed); the engine never needs
PyTorch. Random weights: the speed does not depend on them.
"""
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, NH, lam):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)
        self.NH, self.lam = NH, lam

    def forward(self, x, past):
        B, T, C = x.shape
        HS = C // self.NH
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, HS).transpose(1, 2) for t in (q, k, v))
        if past is not None:
            k = torch.cat([past[0], k], dim=2)
            v = torch.cat([past[1], v], dim=2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(HS)
        if T > 1:
            mask = torch.triu(torch.ones(T, k.shape[2], dtype=torch.bool), 1 + k.shape[2] - T)
            att = att.masked_fill(mask, float("-inf"))
        y = att.softmax(-1) @ v
        if self.lam != 0:
            vn = v[:, :, -T:] / v[:, :, -T:].norm(dim=-1, keepdim=True).clamp_min(1e-12)
            y = y - self.lam * (y * vn).sum(-1, keepdim=True) * vn
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, C))
        x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))
        return x, (k, v)


class GPT(nn.Module):
    def __init__(self, V=50257, T=64, C=128, NH=2, L=2, lam=0.0):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, NH, lam) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, pos, past):
        x = self.wte(idx) + self.wpe(torch.arange(pos, pos + idx.shape[1]))
        new = []
        for i, b in enumerate(self.h):
            x, kv = b(x, past[i] if past else None)
            new.append(kv)
        return self.ln_f(x[:, -1]) @ self.wte.weight.t(), new


def decode(model, B, steps):
    ids = (torch.arange(B) * 997 % 50257).view(B, 1)
    t0 = time.perf_counter()
    logits, past = model(ids, 0, None)
    for s in range(steps):
        ids = logits.argmax(-1, keepdim=True)
        logits, past = model(ids, s + 1, past)
    return time.perf_counter() - t0


def main():
    torch.manual_seed(0)
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(threads)
    runs, steps = 7, 63
    for lam, name in ((0.0, "SA"), (1.0, "XSA")):
        model = GPT(lam=lam).eval()
        for B in (1, 16):
            with torch.no_grad():
                decode(model, B, steps)
                t = statistics.median(decode(model, B, steps) for _ in range(runs))
            print(f"PyTorch {torch.__version__} cached greedy decode, {name}, batch {B:2d}: "
                  f"{B * steps / t:7.0f} tokens/s ({t / steps * 1e3:.3f} ms per step; median of {runs}, "
                  f"{threads} threads)")


if __name__ == "__main__":
    main()
