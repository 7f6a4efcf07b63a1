"""Self-checks of the PyTorch Llama oracle (torch_llama.py), run by selftest.py.

  1. The model's loss against a float64 numpy forward written separately
     (explicit per-element RoPE, per-head attention loops reading kv head
     h // group), tied and untied, n_kv_head 1, 2 and 4 of 4 heads.
  2. RoPE's rotate-half against a complex-number rotation of the pairs
     (x[i], x[i + D/2]) by t * theta^(-2i/D), and the property RoPE exists
     for: a rotated query-key score depends only on the positions' distance.
  3. Grouped-query attention against multi-head attention whose key/value
     projection rows are the grouped ones repeated per query head.
  4. RMSNorm against its formula, computed in f32 for bf16 inputs.
  5. torch.autograd.gradcheck of the loss w.r.t. every parameter (float64),
     tied and untied; the tied embedding's gradient is the sum of its uses.
  6. AdamW's decay groups: matrices and embeddings decay, RMSNorm weights not.
  7. The CLI end to end (outputs, loss against numpy, --double, bad input:
     n_kv_head not dividing n_head, odd head dim, qkv rows that disagree with
     the head counts, a missing tensor, out-of-range ids).
  8. bench/torch_train_gpt.py's fast attention path (the benchmark's Llama:
     RoPE table and mask made once, grouped-query attention as one matmul per
     key/value head) against the numpy forward, n_kv_head 1, 2 and 4 of 4
     heads, two lengths.
"""

import math
import os
import subprocess
import sys

import numpy as np
import torch
from torch.nn.utils import stateless

import safetensors_io as st
from torch_gpt import make_adamw
from torch_llama import Llama, LlamaConfig, apply_rope, rms_norm, rope_cos_sin

HERE = os.path.dirname(os.path.abspath(__file__))


def tiny_llama(L=2, C=16, H=4, Hkv=2, F=12, V=11, tie=True, seed=0, dtype=torch.float64,
               theta=10000.0, eps=1e-5):
    cfg = LlamaConfig(n_layer=L, n_head=H, n_kv_head=Hkv, n_embd=C, vocab_size=V, ffn_hidden=F,
                      rope_theta=theta, norm_eps=eps, tie_embeddings=tie)
    g = torch.Generator().manual_seed(seed)
    m = Llama(cfg).to(dtype)
    with torch.no_grad():  # non-trivial values everywhere, RMSNorm weights around 1
        for n, p in m.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=dtype) * 0.3)
            if n.endswith("norm.weight"):
                p.add_(1.0)
    return m


def numpy_llama_loss(state, x, y, H, Hkv, theta=10000.0, eps=1e-5):
    """Independent float64 numpy forward of the definitions (torch_llama.py's
    docstring), returning the mean cross-entropy."""
    s = {k: np.asarray(v, dtype=np.float64) for k, v in state.items()}
    B, T = x.shape
    emb = s["model.embed_tokens.weight"]
    C = emb.shape[1]
    D = C // H
    group = H // Hkv
    L = len({k.split(".")[2] for k in s if k.startswith("model.layers.")})

    def rmsnorm(h, w):
        return h / np.sqrt((h * h).mean(-1, keepdims=True) + eps) * w

    def rope(v):  # v [T, D] of one head: rotate (v[i], v[i + D/2]) by t * theta^(-2i/D)
        out = np.empty_like(v)
        for t in range(v.shape[0]):
            for i in range(D // 2):
                a = t * theta ** (-2.0 * i / D)
                c, sn = math.cos(a), math.sin(a)
                out[t, i] = v[t, i] * c - v[t, i + D // 2] * sn
                out[t, i + D // 2] = v[t, i + D // 2] * c + v[t, i] * sn
        return out

    h = emb[x]  # [B, T, C]
    for layer in range(L):
        P = lambda n: s[f"model.layers.{layer}.{n}"]  # noqa: E731
        a = rmsnorm(h, P("input_layernorm.weight"))
        W = P("self_attn.qkv_proj.weight")
        Wq, Wk, Wv = W[:H * D], W[H * D:(H + Hkv) * D], W[(H + Hkv) * D:]
        att_out = np.zeros((B, T, H * D))
        for b in range(B):
            for head in range(H):
                kv = head // group
                q = rope(a[b] @ Wq[head * D:(head + 1) * D].T)
                k = rope(a[b] @ Wk[kv * D:(kv + 1) * D].T)
                v = a[b] @ Wv[kv * D:(kv + 1) * D].T
                for t in range(T):
                    sc = np.array([q[t] @ k[u] / math.sqrt(D) for u in range(t + 1)])
                    p = np.exp(sc - sc.max())
                    p /= p.sum()
                    att_out[b, t, head * D:(head + 1) * D] = p @ v[:t + 1]
        h = h + att_out @ P("self_attn.o_proj.weight").T
        a = rmsnorm(h, P("post_attention_layernorm.weight"))
        gu = a @ P("mlp.gate_up_proj.weight").T
        Fh = gu.shape[-1] // 2
        gate, up = gu[..., :Fh], gu[..., Fh:]
        h = h + (gate / (1 + np.exp(-gate)) * up) @ P("mlp.down_proj.weight").T
    h = rmsnorm(h, s["model.norm.weight"])
    logits = h @ s.get("lm_head.weight", emb).T
    m = logits.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(logits - m).sum(-1, keepdims=True)))[..., 0]
    picked = np.take_along_axis(logits, y[..., None], -1)[..., 0]
    return float(np.mean(lse - picked))


def _state(m):
    return {n: p.detach().numpy().copy() for n, p in m.named_parameters()}


def _batch(V, B, T, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, V, (B, T), generator=g), torch.randint(0, V, (B, T), generator=g))


def test_llama_against_numpy(check):
    for tie in (True, False):
        for Hkv in (1, 2, 4):
            m = tiny_llama(Hkv=Hkv, tie=tie, seed=10 + Hkv, theta=500.0, eps=1e-3)
            x, y = _batch(m.cfg.vocab_size, 2, 6, seed=Hkv)
            state = _state(m)
            check(("lm_head.weight" in state) == (not tie), f"llama: lm_head present iff untied "
                  f"(tie={tie})")
            got = m(x, y)[1].item()
            ref = numpy_llama_loss(state, x.numpy(), y.numpy(), 4, Hkv, theta=500.0, eps=1e-3)
            check(abs(got - ref) < 1e-10,
                  f"llama: loss {got:.12f} == numpy {ref:.12f} (n_kv_head {Hkv}, tie {tie})")
    # from_numpy_state in f32 (RoPE table in f32, as Hugging Face) is within f32 rounding
    m = tiny_llama(Hkv=2, tie=False, seed=3)
    x, y = _batch(m.cfg.vocab_size, 2, 6, seed=4)
    state = _state(m)
    ref = numpy_llama_loss(state, x.numpy(), y.numpy(), 4, 2)
    m32 = Llama.from_numpy_state(state, 4, 2, dtype=torch.float32)
    check(abs(m32(x, y)[1].item() - ref) < 1e-5, "llama: from_numpy_state (f32) vs numpy")
    check(not m32.cfg.tie_embeddings and m32.cfg.ffn_hidden == 12,
          "llama: config from the file (untied, ffn_hidden from gate_up rows / 2)")
    try:
        Llama.from_numpy_state({**state, "model.layers.0.mlp.c_fc.bias": np.zeros(3)}, 4, 2)
        ok = False
    except ValueError as e:
        ok = "unexpected" in str(e) and "c_fc.bias" in str(e)
    check(ok, "llama: rejects an unexpected parameter by name")


def test_rope(check):
    rng = np.random.default_rng(7)
    B, H, T, D, theta = 2, 3, 9, 8, 10000.0
    x = rng.standard_normal((B, H, T, D))
    cos, sin = rope_cos_sin(T, D, theta, torch.float64)
    got = apply_rope(torch.from_numpy(x), cos, sin).numpy()
    z = x[..., :D // 2] + 1j * x[..., D // 2:]
    i = np.arange(D // 2)
    angle = np.arange(T)[:, None] * theta ** (-2.0 * i / D)[None, :]
    z = z * np.exp(1j * angle)
    want = np.concatenate([z.real, z.imag], axis=-1)
    check(np.max(np.abs(got - want)) < 1e-12, "rope: rotate-half == complex rotation of the "
          "pairs (x[i], x[i + D/2])")
    # Norm-preserving, and the score of a rotated query/key pair depends only on the distance.
    check(np.allclose(np.linalg.norm(got, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12),
          "rope: preserves each head's norm")
    q, k = rng.standard_normal(D), rng.standard_normal(D)
    qs = apply_rope(torch.from_numpy(np.tile(q, (T, 1))), cos, sin).numpy()
    ks = apply_rope(torch.from_numpy(np.tile(k, (T, 1))), cos, sin).numpy()
    pairs = [(5, 2), (8, 5), (3, 0)]  # distance 3 at three positions
    scores = [qs[m] @ ks[n] for m, n in pairs]
    check(max(scores) - min(scores) < 1e-12 and abs(scores[0] - qs[1] @ ks[1]) > 1e-6,
          "rope: q.k depends only on the distance between positions")
    # The f32 table (Hugging Face's inv_freq in f32) is within f32 rounding of the exact angles
    c32, s32 = rope_cos_sin(T, D, theta, torch.float32)
    err = max((c32.double() - cos).abs().max().item(), (s32.double() - sin).abs().max().item())
    check(err < 1e-6, f"rope: f32 table within {err:.1e} of f64")


def test_gqa_is_mha_with_repeated_heads(check):
    H, Hkv, C = 4, 2, 16
    D, group = C // H, H // Hkv
    m = tiny_llama(H=H, Hkv=Hkv, C=C, seed=21)
    x, y = _batch(m.cfg.vocab_size, 2, 7, seed=22)
    state = _state(m)
    mha_state = dict(state)
    for layer in range(m.cfg.n_layer):
        name = f"model.layers.{layer}.self_attn.qkv_proj.weight"
        W = state[name]
        q, k, v = W[:H * D], W[H * D:(H + Hkv) * D], W[(H + Hkv) * D:]
        rep = lambda w: np.concatenate(  # noqa: E731  head h gets kv head h // group
            [w[(h // group) * D:(h // group + 1) * D] for h in range(H)])
        mha_state[name] = np.concatenate([q, rep(k), rep(v)])
    mha = Llama.from_numpy_state(mha_state, H, H, dtype=torch.float64)
    gqa = Llama.from_numpy_state(state, H, Hkv, dtype=torch.float64)
    lg, lm = gqa(x, y), mha(x, y)
    check(torch.max(torch.abs(lg[0] - lm[0])).item() < 1e-12 and abs(lg[1].item() - lm[1].item())
          < 1e-12, "gqa: n_kv_head 2 of 4 == multi-head attention with the kv heads repeated")
    # a different grouping (head h reads kv head h % Hkv) gives another model: the mapping matters
    wrong = dict(state)
    for layer in range(m.cfg.n_layer):
        name = f"model.layers.{layer}.self_attn.qkv_proj.weight"
        W = state[name]
        q, k, v = W[:H * D], W[H * D:(H + Hkv) * D], W[(H + Hkv) * D:]
        rep = lambda w: np.concatenate(  # noqa: E731
            [w[(h % Hkv) * D:(h % Hkv + 1) * D] for h in range(H)])
        wrong[name] = np.concatenate([q, rep(k), rep(v)])
    lw = Llama.from_numpy_state(wrong, H, H, dtype=torch.float64)(x, y)[1].item()
    check(abs(lw - lg[1].item()) > 1e-6, "gqa: the h // group mapping is not h % n_kv_head")


def test_rms_norm(check):
    rng = np.random.default_rng(8)
    x, w, eps = rng.standard_normal((5, 12)) * 3, rng.standard_normal(12), 1e-5
    want = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * w
    got = rms_norm(torch.from_numpy(x), torch.from_numpy(w), eps).numpy()
    check(np.max(np.abs(got - want)) < 1e-12, "rmsnorm: x * rsqrt(mean(x^2) + eps) * w")
    xb, wb = torch.from_numpy(x).bfloat16(), torch.from_numpy(w).bfloat16()
    got_b = rms_norm(xb, wb, eps)
    want_b = rms_norm(xb.float(), wb.float(), eps).bfloat16()
    check(got_b.dtype == torch.bfloat16 and torch.equal(got_b, want_b),
          "rmsnorm: bf16 input computed in f32, rounded once")


def test_llama_gradcheck(check):
    for tie in (True, False):
        m = tiny_llama(L=2, C=8, H=2, Hkv=1, F=6, V=7, tie=tie, seed=30)
        x, y = _batch(7, 2, 4, seed=31)
        names = [n for n, _ in m.named_parameters()]
        params = tuple(p.detach().clone().requires_grad_(True) for _, p in m.named_parameters())

        def f(*ps):
            return stateless.functional_call(m, dict(zip(names, ps)), (x, y))[1]

        ok = torch.autograd.gradcheck(f, params, eps=1e-6, atol=1e-6, rtol=1e-5)
        check(ok, f"llama: gradcheck over {sum(p.numel() for p in params)} parameters "
              f"(tie {tie})")
    # tied: the embedding's gradient is the sum of the lookup's and the LM head's
    m = tiny_llama(L=1, C=8, H=2, Hkv=1, F=6, V=7, tie=True, seed=32)
    x, y = _batch(7, 2, 4, seed=33)
    m(x, y)[1].backward()
    tied = m.model.embed_tokens.weight.grad.clone()
    state = _state(m)
    u = Llama.from_numpy_state({**state, "lm_head.weight": state["model.embed_tokens.weight"]},
                               2, 1, dtype=torch.float64)
    u(x, y)[1].backward()
    summed = u.model.embed_tokens.weight.grad + u.lm_head.weight.grad
    both_used = (u.lm_head.weight.grad.abs().sum() > 0
                 and u.model.embed_tokens.weight.grad.abs().sum() > 0)
    check(torch.max(torch.abs(tied - summed)).item() < 1e-12 and both_used,
          "llama: tied embedding gradient == lookup's + LM head's")


def test_llama_adamw_groups(check):
    for tie in (True, False):
        m = tiny_llama(tie=tie)
        opt = make_adamw(m, 1e-3, 0.1)
        decayed = {id(p) for grp in opt.param_groups if grp["weight_decay"] > 0
                   for p in grp["params"]}
        names = {n for n, p in m.named_parameters() if id(p) in decayed}
        norms = {n for n in names if n.endswith("norm.weight")}
        want = {n for n, p in m.named_parameters() if not n.endswith("norm.weight")}
        check(names == want and not norms, f"llama adamw: every matrix and embedding decays, no "
              f"RMSNorm weight (tie {tie})")


def test_llama_cli(check, tmp):
    V, C, H, Hkv, F, L, B, T, K = 13, 16, 4, 2, 24, 2, 3, 8, 3
    cli = os.path.join(HERE, "torch_llama.py")
    w, bt, out = (os.path.join(tmp, f) for f in ("lw.st", "lb.st", "lo.st"))
    rng = np.random.default_rng(9)
    x = rng.integers(0, V, (B, T)).astype(np.int32)
    y = rng.integers(0, V, (B, T)).astype(np.int32)
    st.write(bt, {"x": x, "y": y})

    def run(extra=(), n_head=H, n_kv=Hkv):
        cmd = [sys.executable, cli, "--weights", w, "--batch", bt, "--n-head", str(n_head),
               "--n-kv-head", str(n_kv), "--rope-theta", "10000", "--norm-eps", "1e-5",
               "--steps", str(K), "--lr", "1e-2", "--weight-decay", "0.1", "--beta1", "0.9",
               "--beta2", "0.95", "--eps", "1e-8", "--out", out, *extra]
        return subprocess.run(cmd, capture_output=True, text=True)

    for tie in (False, True):
        m = tiny_llama(L=L, C=C, H=H, Hkv=Hkv, F=F, V=V, tie=tie, seed=40, dtype=torch.float32)
        state = _state(m)
        st.write(w, state)
        r = run()
        check(r.returncode == 0, f"llama cli: runs (tie {tie})" + ("" if r.returncode == 0
                                                                    else ": " + r.stderr))
        if r.returncode != 0:
            continue
        o, meta = st.read(out)
        check(o["loss"].shape == (1,) and o["loss"].dtype == np.float32
              and o["losses"].shape == (K,) and o["losses"][0] == o["loss"][0],
              "llama cli: loss F32[1], losses F32[K], losses[0] == loss")
        check(o["losses"][-1] < o["losses"][0], "llama cli: loss decreases")
        ref = numpy_llama_loss(state, x, y, H, Hkv)
        check(abs(o["loss"][0] - ref) < 1e-5, "llama cli: loss matches numpy")
        check(all(("grad." + n) in o and ("after." + n) in o
                  and o["grad." + n].shape == state[n].shape for n in state)
              and len(o) == 2 + 2 * len(state) and ("grad.lm_head.weight" in o) == (not tie),
              f"llama cli: grad.* and after.* for every param (tie {tie})")
        check(meta.get("tie_embeddings") == str(tie) and meta.get("n_kv_head") == str(Hkv)
              and meta.get("ffn_hidden") == str(F), "llama cli: metadata")
        moved = all(not np.array_equal(o["after." + n], state[n]) for n in state)
        check(moved, "llama cli: every parameter moved")
    r2 = run(["--double", "--out-f64"])
    o2 = st.load(out) if r2.returncode == 0 else {}
    check(r2.returncode == 0 and o2["loss"].dtype == np.float64
          and abs(o2["loss"][0] - numpy_llama_loss(state, x, y, H, Hkv)) < 1e-12,
          "llama cli: --double --out-f64")
    # bad inputs: one line naming the problem, exit status 2
    r = run(n_kv=3)
    check(r.returncode == 2 and "n_kv_head 3" in r.stderr and "n_head 4" in r.stderr,
          "llama cli: n_kv_head not dividing n_head names both")
    r = run(n_kv=4)
    check(r.returncode == 2 and "qkv_proj" in r.stderr and "n_kv_head 4" in r.stderr,
          "llama cli: qkv rows that disagree with the head counts name the tensor")
    r = run(n_head=16, n_kv=16)
    check(r.returncode == 2 and "head dim 1" in r.stderr and "odd" in r.stderr,
          "llama cli: odd head dim")
    st.write(bt, {"x": x + V, "y": y})
    r = run()
    check(r.returncode == 2 and "token ids" in r.stderr, "llama cli: rejects out-of-range ids")
    st.write(bt, {"x": x, "y": y})
    bad = dict(state)
    del bad["model.layers.1.mlp.down_proj.weight"]
    st.write(w, bad)
    r = run()
    check(r.returncode == 2 and "missing" in r.stderr and "down_proj" in r.stderr,
          "llama cli: rejects a missing tensor by name")


def test_bench_fast_attention(check):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "bench"))
    import argparse

    from torch_train_gpt import build_llama
    for Hkv in (1, 2, 4):
        ref = tiny_llama(Hkv=Hkv, seed=20 + Hkv)
        a = argparse.Namespace(n_layer=2, n_head=4, n_kv_head=Hkv, n_embd=16, ffn_hidden=12,
                               oracle_attention=False)
        fast = build_llama(a, 11).to(torch.float64)
        fast.load_state_dict(ref.state_dict())
        check(type(fast.model.layers[0].self_attn).__name__ == "FastAttention",
              "bench llama: the fast attention path is in use")
        state = _state(ref)
        for T in (8, 5):
            x, y = _batch(11, 2, T, seed=T + Hkv)
            got = fast(x, y)[1].item()
            want = numpy_llama_loss(state, x.numpy(), y.numpy(), 4, Hkv)
            check(abs(got - want) < 1e-10,
                  f"bench llama: fast path loss {got:.12f} == numpy {want:.12f} (n_kv_head "
                  f"{Hkv}, T {T})")


def run_all(check, tmp):
    test_llama_against_numpy(check)
    test_rope(check)
    test_gqa_is_mha_with_repeated_heads(check)
    test_rms_norm(check)
    test_llama_gradcheck(check)
    test_llama_adamw_groups(check)
    test_llama_cli(check, tmp)
    test_bench_fast_attention(check)
