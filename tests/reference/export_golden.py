"""Usage: python3 tests/reference/export_golden.py [OUT_DIR] [--params DIR]

Writes the PyTorch golden values the tests compare the engine against:
OUT_DIR/<case>/{model,batch,expected_SA,expected_XSA_l1,expected_XSA_l0.5}.safetensors
and summary.json for the cases tiny, odd and spec_init (OUT_DIR defaults to
tests/fixtures/golden of this checkout; tests/fixtures/golden/README.md says
what each file holds).

The model is xsa's GPT (GPT-2 style, pre-LayerNorm, learned positions, tied
lm_head, exact-erf GELU, MLP 4x; attention SA or XSA: Z = Y - lambda (Y.Vn) Vn
with Vn = V / max(|V|, 1e-12) per head and token), written here from torch
primitives. Parameters are float32 (that is what the engine holds); every
value is computed from them in float64 and stored as float32. Runs on one
thread with deterministic algorithms, so running it twice writes
byte-identical files. Needs torch and numpy (Debian: python3-torch), nothing
else; safetensors files are written by hand in the layout the engine's own
writer produces (core/safetensors.c), so a re-save is byte-identical.

--params DIR: take each case's model.safetensors and batch.safetensors from
DIR/<case>/ instead of generating them (to check this generator against
golden values made by another implementation, or to recompute the expected
values of existing parameters).
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

# name, vocab, n_layer, d_model, n_head, seq_len, batch, init, seed
CASES = [
    ("tiny", 64, 2, 16, 2, 8, 2, "random", 0),
    ("odd", 97, 3, 24, 3, 11, 3, "random", 1),
    ("spec_init", 50, 2, 32, 4, 16, 2, "spec", 2),
]
# file suffix, attention, lambda
VARIANTS = [("SA", "sa", 0.0), ("XSA_l1", "xsa", 1.0), ("XSA_l0.5", "xsa", 0.5)]
ADAMW = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
LN_EPS = 1e-5
VN_EPS = 1e-12
COS_EPS = 1e-8
TRAJECTORY_STEPS = 5

LAYER_NAMES = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
               "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
               "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]


# ---- safetensors ----------------------------------------------------------

def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: float32 or int32 numpy array}. Header as the engine
    writes it: compact JSON, __metadata__ first (keys in the given order),
    then the tensors in sorted name order with contiguous offsets, padded
    with spaces to a multiple of 8 bytes."""
    header, blobs, pos = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        dtype = {np.dtype("<f4"): "F32", np.dtype("<i4"): "I32"}[a.dtype.newbyteorder("<")]
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [pos, pos + len(b)]}
        blobs.append(b)
        pos += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    os.replace(tmp, path)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        dt = {"F32": "<f4", "I32": "<i4"}[e["dtype"]]
        s, t = e["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + s:8 + n + t], dtype=dt).reshape(e["shape"]).copy()
    return out, meta


# ---- parameters and batch -------------------------------------------------

def param_shapes(V, L, C, T):
    """(name, shape) in the engine's checkpoint order (core/gpt.c); the four
    Linear weights are input-major."""
    out = [("wte.weight", (V, C)), ("wpe.weight", (T, C))]
    shapes = {"attn.c_attn.weight": (C, 3 * C), "attn.c_attn.bias": (3 * C,),
              "attn.c_proj.weight": (C, C), "mlp.c_fc.weight": (C, 4 * C),
              "mlp.c_fc.bias": (4 * C,), "mlp.c_proj.weight": (4 * C, C)}
    for l in range(L):
        for n in LAYER_NAMES:
            out.append((f"h.{l}.{n}", shapes.get(n, (C,))))
    out += [("ln_f.weight", (C,)), ("ln_f.bias", (C,))]
    return out


def make_params(V, L, C, T, init, rng):
    """random: every term visible (weights N(0,0.3), biases N(0,0.1), LN
    weights 1+N(0,0.1), LN biases N(0,0.1)). spec: the engine's init scheme
    (core/gpt.c init_weights): N(0,0.02) for wte, wpe, c_attn and c_fc
    weights, N(0,0.02/sqrt(2 n_layer)) for the two c_proj weights, LayerNorm
    weights 1, every bias 0. Drawn from numpy's PCG64, in checkpoint order."""
    P = {}
    for name, shape in param_shapes(V, L, C, T):
        is_ln = name.startswith("ln_f.") or ".ln_" in name
        is_w = name.endswith(".weight")
        if init == "random":
            if is_ln and is_w:
                x = 1.0 + 0.1 * rng.standard_normal(shape)
            elif is_w:
                x = 0.3 * rng.standard_normal(shape)
            else:
                x = 0.1 * rng.standard_normal(shape)
        else:
            if is_ln and is_w:
                x = np.ones(shape)
            elif not is_w:
                x = np.zeros(shape)
            elif name.endswith("c_proj.weight"):
                x = rng.standard_normal(shape) * (0.02 / math.sqrt(2.0 * L))
            else:
                x = rng.standard_normal(shape) * 0.02
        P[name] = x.astype(np.float32)
    return P


def make_batch(V, B, T, rng):
    """B random sequences of T+1 tokens: inputs the first T, targets the
    last T (the next token)."""
    seq = rng.integers(0, V, size=(B, T + 1)).astype(np.int32)
    return {"inputs": np.ascontiguousarray(seq[:, :-1]), "targets": np.ascontiguousarray(seq[:, 1:])}


# ---- the model in float64 --------------------------------------------------

def layernorm(x, w, b):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + LN_EPS) * w + b


def gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def forward(P, inputs, targets, cfg, lam, acts=None):
    """Loss and logits; acts (a dict) receives per layer v, y, z, att
    ([B,H,T,hd] / [B,H,T,T])."""
    B, T = inputs.shape
    C, H, L = cfg["d_model"], cfg["n_head"], cfg["n_layer"]
    hd = C // H
    x = P["wte.weight"][inputs] + P["wpe.weight"][:T]
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    for l in range(L):
        p = lambda n: P[f"h.{l}.{n}"]  # noqa: E731
        h = layernorm(x, p("ln_1.weight"), p("ln_1.bias"))
        qkv = h @ p("attn.c_attn.weight") + p("attn.c_attn.bias")
        q, k, v = (t.reshape(B, T, H, hd).transpose(1, 2) for t in qkv.split(C, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = torch.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = att @ v
        if lam != 0.0:
            vn = v / v.norm(dim=-1, keepdim=True).clamp_min(VN_EPS)
            z = y - lam * (y * vn).sum(-1, keepdim=True) * vn
        else:
            z = y
        if acts is not None:
            acts[l] = {"v": v, "y": y, "z": z, "att": att}
        x = x + z.transpose(1, 2).reshape(B, T, C) @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h = layernorm(x, p("ln_2.weight"), p("ln_2.bias"))
        h = gelu(h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"))
        x = x + h @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
    x = layernorm(x, P["ln_f.weight"], P["ln_f.bias"])
    logits = x @ P["wte.weight"].t()
    loss = torch.nn.functional.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))
    return loss, logits


def cosine(a, b):
    """cos over the last dim: a.b / max(|a||b|, 1e-8)."""
    den = a.norm(dim=-1) * b.norm(dim=-1)
    return (a * b).sum(-1) / den.clamp_min(COS_EPS)


def probes(act, T):
    """Per-head metrics [H] of one layer's attention (see the README)."""
    v, y, z, att = act["v"], act["y"], act["z"], act["att"]
    vv = cosine(v.unsqueeze(3), v.unsqueeze(2))              # [B,H,T,T]
    off = ~torch.eye(T, dtype=torch.bool)
    out = {"value_cosine_sim": vv[:, :, off].mean(dim=(0, 2)),
           "self_attn_weight": torch.diagonal(att, dim1=-2, dim2=-1).mean(dim=(0, 2))}
    pre, post = cosine(y, v), cosine(z, v)                    # [B,H,T]
    out["preproj_output_self_cosim"] = pre.mean(dim=(0, 2))
    out["postproj_output_self_cosim"] = post.mean(dim=(0, 2))
    out["preproj_output_self_cosim_pos1"] = pre[:, :, 1:].mean(dim=(0, 2))
    out["postproj_output_self_cosim_pos1"] = post[:, :, 1:].mean(dim=(0, 2))
    return out


def f32(t):
    return t.detach().to(torch.float32).contiguous().numpy()


def leaf_params(P32):
    return {n: torch.from_numpy(a).to(torch.float64).requires_grad_(True) for n, a in P32.items()}


def expected(P32, batch, cfg, lam):
    """Everything one variant's expected_*.safetensors holds, and the
    trajectory."""
    inputs = torch.from_numpy(batch["inputs"]).long()
    targets = torch.from_numpy(batch["targets"]).long()
    T = inputs.shape[1]
    names = list(P32)
    out = {}

    P = leaf_params(P32)
    acts = {}
    loss, logits = forward(P, inputs, targets, cfg, lam, acts)
    loss.backward()
    out["loss"] = f32(loss.reshape(1))
    out["logits"] = f32(logits)
    for n in names:
        out["grad." + n] = f32(P[n].grad)
    with torch.no_grad():
        for l, a in acts.items():
            for k in ("v", "y", "z", "att"):
                out[f"act.h{l}.{k}"] = f32(a[k])
            for k, val in probes(a, T).items():
                out[f"probe.h{l}.{k}"] = f32(val)
    opt = torch.optim.AdamW([P[n] for n in names], foreach=False, **ADAMW)
    opt.step()
    for n in names:
        out["adamw1." + n] = f32(P[n])

    P = leaf_params(P32)
    opt = torch.optim.AdamW([P[n] for n in names], foreach=False, **ADAMW)
    traj = []
    for _ in range(TRAJECTORY_STEPS):
        opt.zero_grad(set_to_none=True)
        loss, _ = forward(P, inputs, targets, cfg, lam)
        traj.append(loss.item())
        loss.backward()
        opt.step()
    out["trajectory.loss"] = np.array(traj, dtype=np.float32)
    return out


# ---- main -----------------------------------------------------------------

def export_case(case, out_dir, params_dir):
    name, V, L, C, H, T, B, init, seed = case
    meta = {"vocab": V, "n_layer": L, "d_model": C, "n_head": H, "seq_len": T,
            "attention": "sa", "lambda": "1.0", "seed": seed}
    if params_dir:
        P32, meta_in = read_safetensors(os.path.join(params_dir, name, "model.safetensors"))
        batch, _ = read_safetensors(os.path.join(params_dir, name, "batch.safetensors"))
        meta = meta_in
        V, L, C, H = (int(meta[k]) for k in ("vocab", "n_layer", "d_model", "n_head"))
        T = int(meta["seq_len"])
        order = [n for n, _ in param_shapes(V, L, C, T)]
        P32 = {n: P32[n] for n in order}
        B = batch["inputs"].shape[0]
    else:
        rng = np.random.Generator(np.random.PCG64(seed))
        P32 = make_params(V, L, C, T, init, rng)
        batch = make_batch(V, B, T, rng)
    cfg = {"n_layer": L, "d_model": C, "n_head": H}
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    write_safetensors(os.path.join(d, "model.safetensors"), P32, meta)
    write_safetensors(os.path.join(d, "batch.safetensors"), batch)
    summary = {"config": {k: str(v) for k, v in meta.items()}, "init": init, "batch": B,
               "variants": {}}
    for vname, attention, lam in VARIANTS:
        out = expected(P32, batch, cfg, lam)
        lam_s = repr(lam if attention == "xsa" else 1.0)
        write_safetensors(os.path.join(d, f"expected_{vname}.safetensors"), out,
                          {"attention": attention, "lambda": lam_s})
        summary["variants"][vname] = {
            "attention": attention, "lambda": float(lam_s),
            "loss": float(out["loss"][0]),
            "trajectory": [float(x) for x in out["trajectory.loss"]]}
        print(f"{name:9s} {vname:8s} loss {out['loss'][0]:.6f} trajectory "
              + " ".join(f"{x:.6f}" for x in out["trajectory.loss"]))
    with open(os.path.join(d, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")


def main(argv):
    usage = "usage: python3 tests/reference/export_golden.py [OUT_DIR] [--params DIR]"
    args, params_dir = [], None
    i = 0
    while i < len(argv):
        if argv[i] == "--params" and i + 1 < len(argv):
            params_dir = argv[i + 1]
            i += 2
        elif argv[i] in ("-h", "--help"):
            print(usage)
            return 0
        elif argv[i].startswith("-") or len(args) == 1:
            print(usage, file=sys.stderr)
            return 2
        else:
            args.append(argv[i])
            i += 1
    here = os.path.dirname(os.path.abspath(__file__))
    out_dir = args[0] if args else os.path.join(here, "..", "fixtures", "golden")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for case in CASES:
        export_case(case, out_dir, params_dir)
    print(f"written to {os.path.normpath(out_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
