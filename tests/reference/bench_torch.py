"""PyTorch reference timing of one training step of the default model.

The same architecture as xsa's GPT (GPT-2 style, pre-LN, tied lm_head, GELU erf,
SA or XSA attention), batch 16 x seq_len 64, AdamW. Used only to compare speed
on the same CPU (`python3 tests/reference/bench_torch.py`); the engine never
needs PyTorch. Prints the median ms/step of 20 steps after 5 warm-up steps.
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

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.NH)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = att @ v
        if self.lam != 0:
            vn = v / v.norm(dim=-1, keepdim=True).clamp_min(1e-12)
            y = y - self.lam * (y * vn).sum(-1, keepdim=True) * vn
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, V=50257, T=64, C=128, NH=2, L=2, lam=0.0):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, NH, lam) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def bench(lam):
    torch.manual_seed(0)
    model = GPT(lam=lam)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    x = torch.randint(0, 50257, (16, 64))
    y = torch.randint(0, 50257, (16, 64))
    times = []
    for i in range(25):
        t0 = time.perf_counter()
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i >= 5:
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


if __name__ == "__main__":
    torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
    sa, xsa = bench(0.0), bench(1.0)
    print(f"pytorch {torch.__version__} ({torch.get_num_threads()} threads): "
          f"step SA {sa:.1f} ms, XSA {xsa:.1f} ms (median of 20)")
