"""PyTorch reference timing of the training and evaluation steps of the default model.

The same architecture as xsa's GPT (GPT-2 style, pre-LN, tied lm_head, GELU erf,
SA or XSA attention), AdamW. Used only to compare speed on the same CPU; the
engine never needs PyTorch.

  python3 tests/reference/bench_torch.py [THREADS]
      both shapes (16 x 64 and 8 x 256, the model's seq_len = T), SA and XSA,
      train step (forward + backward + AdamW) and eval step (forward and loss
      under no_grad): the median ms of 20 steps after 3 warm-up steps.
  python3 tests/reference/bench_torch.py --serve THREADS
      what tests/bench_step runs so that its own steps and these alternate
      (outside load then hits both alike). Commands on stdin, one per line:
        setup B T      build SA and XSA models (seq_len T) with AdamW, one batch
        train sa|xsa K run K train steps, reply the K times in ms
        eval sa|xsa K  run K eval steps, reply the K times in ms
        quit
      Every reply is one line ("ok", numbers, or "error: ...").
"""
import math
import re
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


class Pair:
    """SA and XSA models of one shape, each with its AdamW, and one batch."""

    def __init__(self, B, T):
        torch.manual_seed(0)
        self.models = {"sa": GPT(T=T, lam=0.0), "xsa": GPT(T=T, lam=1.0)}
        self.opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01)
                     for k, m in self.models.items()}
        self.x = torch.randint(0, 50257, (B, T))
        self.y = torch.randint(0, 50257, (B, T))

    def train(self, which, k):
        model, opt = self.models[which], self.opts[which]
        times = []
        for _ in range(k):
            t0 = time.perf_counter()
            loss = model(self.x, self.y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            times.append((time.perf_counter() - t0) * 1000)
        return times

    def eval(self, which, k):
        model = self.models[which]
        times = []
        with torch.no_grad():
            for _ in range(k):
                t0 = time.perf_counter()
                model(self.x, self.y).item()
                times.append((time.perf_counter() - t0) * 1000)
        return times


def serve():
    pair = None
    for line in sys.stdin:
        w = line.split()
        try:
            if not w:
                continue
            if w[0] == "quit":
                break
            if w[0] == "setup":
                pair = Pair(int(w[1]), int(w[2]))
                for which in ("sa", "xsa"):
                    pair.train(which, 2)
                    pair.eval(which, 1)
                reply = "ok"
            elif w[0] in ("train", "eval") and pair is not None:
                times = getattr(pair, w[0])(w[1], int(w[2]))
                reply = " ".join(f"{t:.3f}" for t in times)
            else:
                reply = "error: bad command " + line.strip()
        except Exception as e:  # reported to the caller, which stops comparing
            reply = f"error: {e}"
        print(reply, flush=True)


def build():
    """The version and the BLAS it was built with: Debian's 1.13 has a generic
    BLAS, so its times say little about PyTorch built with MKL or OpenBLAS."""
    m = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    return f"{torch.__version__} (BLAS_INFO={m.group(1) if m else 'unknown'})"


def main():
    for B, T in ((16, 64), (8, 256)):
        pair = Pair(B, T)
        res = {}
        for which in ("sa", "xsa"):
            pair.train(which, 3)
            pair.eval(which, 3)
        for which in ("sa", "xsa"):
            res["train", which] = statistics.median(pair.train(which, 20))
            res["eval", which] = statistics.median(pair.eval(which, 20))
        print(f"pytorch {build()} ({torch.get_num_threads()} threads) {B}x{T}: "
              f"train SA {res['train', 'sa']:.1f} ms, XSA {res['train', 'xsa']:.1f} ms; "
              f"eval SA {res['eval', 'sa']:.1f} ms, XSA {res['eval', 'xsa']:.1f} ms (median of 20)")


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--serve":
        torch.set_num_threads(int(args[1]) if len(args) > 1 else 2)
        print("ready " + build(), flush=True)
        serve()
    else:
        torch.set_num_threads(int(args[0]) if args else 2)
        main()
