#!/usr/bin/python3
"""PyTorch reference for causal self-attention on the fused qkv layout.

qkv [B, T, 3C] (q, k, v side by side, each n_head heads of D = C / n_head),
out = softmax(q k^T / sqrt(D), causal) v as [B, T, C]; with dout [B, T, C],
dqkv = d(sum(out * dout)) / dqkv by autograd. Computed in float64 from the
stored values (the reference glass's kernels are judged against), written F32.

CLI (run with Debian's /usr/bin/python3, which has torch):
    /usr/bin/python3 tests/oracle/torch_attention.py --input IN.safetensors \
        --n-head H --out OUT.safetensors [--threads N]
  IN: one or more cases, each "qkv.NAME" [B, T, 3C] and "dout.NAME" [B, T, C]
      (F32, BF16 or F64), all with n_head H (one process for all: importing
      torch is most of the time).
  OUT: per case "out.NAME" [B, T, C], "dqkv.NAME" [B, T, 3C], "lse.NAME"
       [B, H, T] (the per-row log-sum-exp of the scaled, masked scores), F32.
  Exit status 2 with a message on stderr on bad input.
"""

import argparse
import math
import os
import sys


def _fail(msg):
    print(f"torch_attention.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def main(argv=None):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import numpy as np
    import safetensors_io as st
    import torch

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--input", required=True)
    ap.add_argument("--n-head", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args(argv)
    if a.threads > 0:
        torch.set_num_threads(a.threads)

    t = st.load(a.input)
    names = [k[len("qkv."):] for k in t if k.startswith("qkv.")]
    if not names:
        _fail(f"{a.input} has no tensor 'qkv.NAME'")
    result = {}
    for name in names:
        if "dout." + name not in t:
            _fail(f"{a.input} has qkv.{name} but no dout.{name}")
        out, dqkv, lse = attention(torch, np, t["qkv." + name], t["dout." + name], a.n_head, name)
        result.update({"out." + name: out, "dqkv." + name: dqkv, "lse." + name: lse})
    st.write(a.out, result)


def attention(torch, np, qkv_values, dout_values, H, name):
    """out, dqkv and lse (F32 numpy) of one case, computed in float64."""
    qkv = torch.tensor(np.asarray(qkv_values, dtype=np.float64), requires_grad=True)
    dout = torch.tensor(np.asarray(dout_values, dtype=np.float64))
    if qkv.dim() != 3 or qkv.shape[2] % 3 != 0:
        _fail(f"qkv.{name} has shape {list(qkv.shape)}, not [B, T, 3C]")
    B, T, C3 = qkv.shape
    C = C3 // 3
    if H <= 0 or C % H != 0:
        _fail(f"qkv.{name}: C = {C} is not divisible by n_head {H}")
    if list(dout.shape) != [B, T, C]:
        _fail(f"dout.{name} has shape {list(dout.shape)}, not [B, T, C] = {[B, T, C]}")
    D = C // H
    q, k, v = qkv.split(C, dim=-1)
    heads = lambda x: x.reshape(B, T, H, D).transpose(1, 2)  # [B, H, T, D]
    q, k, v = heads(q), heads(k), heads(v)
    s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    out = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
    out.backward(dout)
    as_f32 = lambda x: x.detach().numpy().astype(np.float32)
    return as_f32(out), as_f32(qkv.grad), as_f32(lse)

if __name__ == "__main__":
    main()
