#!/usr/bin/python3
"""PyTorch reference for causal self-attention on the fused qkv layout.

qkv [B, T, (n_head + 2 n_kv_head) D]: n_head query heads, then n_kv_head key
heads, then n_kv_head value heads, each of D values (n_kv_head = n_head is
[B, T, 3C], C = n_head D). Grouped-query attention (n_kv_head < n_head, dividing
it): query head h attends with key/value head h // (n_head / n_kv_head), done
here as PyTorch models do it, by repeat_interleave of k and v over the head
axis. out = softmax(q k^T / sqrt(D), causal) v as [B, T, C]; with dout
[B, T, C], dqkv = d(sum(out * dout)) / dqkv by autograd (the gradients of a key
/ value head sum over the query heads that read it). Computed in float64 from
the stored values (the reference glass's kernels are judged against), written
F32.

CLI (run with Debian's /usr/bin/python3, which has torch):
    /usr/bin/python3 tests/oracle/torch_attention.py --input IN.safetensors \
        --n-head H [--n-kv-head HKV] --out OUT.safetensors [--threads N]
  IN: one or more cases, each "qkv.NAME" [B, T, (H + 2 HKV) D] and "dout.NAME"
      [B, T, H D] (F32, BF16 or F64), all with n_head H and n_kv_head HKV
      (default H) (one process for all: importing torch is most of the time).
  OUT: per case "out.NAME" [B, T, C], "dqkv.NAME" like qkv, "lse.NAME"
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
    ap.add_argument("--n-kv-head", type=int, default=0, help="default: --n-head")
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
        out, dqkv, lse = attention(torch, np, t["qkv." + name], t["dout." + name], a.n_head,
                                   a.n_kv_head or a.n_head, name)
        result.update({"out." + name: out, "dqkv." + name: dqkv, "lse." + name: lse})
    st.write(a.out, result)


def attention(torch, np, qkv_values, dout_values, H, HKV, name):
    """out, dqkv and lse (F32 numpy) of one case, computed in float64."""
    qkv = torch.tensor(np.asarray(qkv_values, dtype=np.float64), requires_grad=True)
    dout = torch.tensor(np.asarray(dout_values, dtype=np.float64))
    if H <= 0 or HKV <= 0 or H % HKV != 0:
        _fail(f"n_kv_head {HKV} must divide n_head {H} (both positive)")
    if qkv.dim() != 3 or qkv.shape[2] % (H + 2 * HKV) != 0:
        _fail(f"qkv.{name} has shape {list(qkv.shape)}, not [B, T, ({H} + 2 * {HKV}) D]")
    B, T, W = qkv.shape
    D = W // (H + 2 * HKV)
    C = H * D
    if list(dout.shape) != [B, T, C]:
        _fail(f"dout.{name} has shape {list(dout.shape)}, not [B, T, C] = {[B, T, C]}")
    q, k, v = qkv.split([C, HKV * D, HKV * D], dim=-1)
    heads = lambda x, n: x.reshape(B, T, n, D).transpose(1, 2)  # [B, n, T, D]
    # each key/value head repeated for the H / HKV query heads that read it: [B, H, T, D]
    q = heads(q, H)
    k = heads(k, HKV).repeat_interleave(H // HKV, dim=1)
    v = heads(v, HKV).repeat_interleave(H // HKV, dim=1)
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
