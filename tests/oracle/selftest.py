#!/usr/bin/python3
"""Self-check for the glass PyTorch oracle (run: /usr/bin/python3 tests/oracle/selftest.py).

Checks:
  1. safetensors_io round trips (F32, F64, I32, I64, BF16, metadata, 0-d and
     empty tensors), BF16 round-to-nearest-even and NaN/inf handling, and
     rejection of malformed files.
  2. GPT forward loss vs an independent numpy implementation (float64).
  3. torch.autograd.gradcheck of the loss w.r.t. every parameter (float64,
     tiny config), including the tied wte.
  4. The two-group AdamW vs a hand-written numpy AdamW for a few steps.
  5. The CLI end to end (outputs, shapes, loss == losses[0], bad input exits
     non-zero).
  6. The Llama oracle (torch_llama.py): selftest_llama.py's checks (against
     numpy, RoPE as a complex rotation, GQA as repeated heads, RMSNorm,
     gradcheck, AdamW groups, CLI, the benchmark's fast attention path).
Exits non-zero on any failure.
"""

import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    from torch.nn.utils import stateless
except ImportError as error:
    # make test (and so CI) sets GLASS_REQUIRE_ORACLE=1: there a missing PyTorch is a failure.
    # A bare ctest skips (exit 77, the test's SKIP_RETURN_CODE) and says why.
    if os.environ.get("GLASS_REQUIRE_ORACLE") == "1":
        print(f"the PyTorch oracle is required (GLASS_REQUIRE_ORACLE=1) but: {error}")
        sys.exit(1)
    print(f"PyTorch oracle self-check skipped: {error}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import safetensors_io as st  # noqa: E402
import selftest_llama  # noqa: E402
from torch_gpt import GPT, GPTConfig, make_adamw  # noqa: E402

FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def test_safetensors(tmp):
    rng = np.random.default_rng(0)
    tensors = {
        "a.f32": rng.standard_normal((3, 5)).astype(np.float32),
        "b.f64": rng.standard_normal((2, 2, 2)),
        "c.i32": rng.integers(-1000, 1000, size=(4, 7)).astype(np.int32),
        "d.i64": np.arange(5, dtype=np.int64),
        "e.scalar": np.array(3.5, dtype=np.float32),
        "f.empty": np.zeros((0, 4), dtype=np.float32),
        "g.bf16": rng.standard_normal((6, 3)).astype(np.float32),
    }
    p = os.path.join(tmp, "rt.safetensors")
    st.write(p, tensors, metadata={"k": "v", "n": 3}, dtypes={"g.bf16": "BF16"})
    with open(p, "rb") as f:
        raw = f.read()
    hlen = int.from_bytes(raw[:8], "little")
    check((8 + hlen) % 8 == 0, "safetensors: data section is 8-byte aligned")
    back, meta = st.read(p)
    check(meta == {"k": "v", "n": "3"}, "safetensors: metadata round trip")
    check(set(back) == set(tensors), "safetensors: names round trip")
    for k, v in tensors.items():
        if k == "g.bf16":
            continue
        b = back[k]
        check(b.dtype == v.dtype and b.shape == v.shape and np.array_equal(b, v),
              f"safetensors: {k} exact round trip")
    g = back["g.bf16"]
    check(g.dtype == np.float32 and g.shape == (6, 3), "bf16: dtype/shape")
    rel = np.max(np.abs(g - tensors["g.bf16"]) / np.abs(tensors["g.bf16"]))
    check(rel <= 2.0 ** -8, f"bf16: relative error {rel:.2e} <= 2^-8")
    # bf16 values survive exactly a second round trip
    p2 = os.path.join(tmp, "rt2.safetensors")
    st.write(p2, {"g": g}, dtypes={"g": "BF16"})
    check(np.array_equal(st.load(p2)["g"], g), "bf16: idempotent round trip")

    # rounding: bf16 has 7 explicit mantissa bits; ulp(1) = 2^-7
    u = 2.0 ** -7
    cases = [
        (1.0 + u / 2, 1.0),             # tie, round to even (down)
        (1.0 + 3 * u / 2, 1.0 + 2 * u),  # tie, round to even (up)
        (1.0 + u / 2 + 2 ** -20, 1.0 + u),  # above tie -> up
        (1.0 + u / 2 - 2 ** -20, 1.0),      # below tie -> down
        (-(1.0 + 3 * u / 2), -(1.0 + 2 * u)),
        (np.finfo(np.float32).max, np.inf),  # rounds up to inf
        (np.float32(3.3895314e38), np.float32(3.3895314e38)),  # max finite bf16
        (np.inf, np.inf), (-np.inf, -np.inf), (0.0, 0.0),
        (1e-40, np.float32(1e-40)),  # subnormal near exact? checked below
    ]
    xs = np.array([c[0] for c in cases], dtype=np.float32)
    got = st.bf16_bits_to_f32(st.f32_to_bf16_bits(xs))
    for (x, want), gv in list(zip(cases, got))[:-1]:
        check(gv == np.float32(want), f"bf16: round({float(x)!r}) = {float(gv)!r}, want {float(want)!r}")
    check(abs(got[-1] - 1e-40) < 2.0 ** -133 * 1.01, "bf16: subnormal rounding")
    check(np.signbit(st.bf16_bits_to_f32(st.f32_to_bf16_bits(np.float32(-0.0)))),
          "bf16: -0 keeps sign")
    nan_bits = np.array([0x7F800001, 0xFFC00000, 0x7FFFFFFF], dtype=np.uint32).view(np.float32)
    check(np.all(np.isnan(st.bf16_bits_to_f32(st.f32_to_bf16_bits(nan_bits)))),
          "bf16: NaN stays NaN")

    # malformed files
    bad = os.path.join(tmp, "bad.safetensors")
    for blob, what in [
        (b"\x01\x00", "too short"),
        ((100).to_bytes(8, "little") + b"{}", "header past EOF"),
        ((2).to_bytes(8, "little") + b"[]", "non-object header"),
        (_mk(b'{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}', 8), "size mismatch"),
        (_mk(b'{"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', 4), "offsets past EOF"),
        (_mk(b'{"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', 2), "unknown dtype"),
    ]:
        with open(bad, "wb") as f:
            f.write(blob)
        try:
            st.read(bad)
            ok = False
        except st.SafetensorsError:
            ok = True
        check(ok, f"safetensors: rejects malformed file ({what})")


def _mk(header, ndata):
    return len(header).to_bytes(8, "little") + header + b"\0" * ndata


def tiny_model(L=2, C=8, H=2, T=5, V=7, seed=0, dtype=torch.float64):
    cfg = GPTConfig(n_layer=L, n_head=H, n_embd=C, vocab_size=V, block_size=T)
    g = torch.Generator().manual_seed(seed)
    m = GPT(cfg).to(dtype)
    with torch.no_grad():  # non-trivial values everywhere, incl. LN and biases
        for _, p in m.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=dtype) * 0.3)
        for n, p in m.named_parameters():
            if ".ln_" in n and n.endswith(".weight"):
                p.add_(1.0)
    return m


def numpy_loss(state, x, y, H):
    """Independent float64 numpy forward."""
    s = {k: np.asarray(v, dtype=np.float64) for k, v in state.items()}
    B, T = x.shape
    wte = s["transformer.wte.weight"]
    C = wte.shape[1]
    hs = C // H

    def ln(h, w, b):
        mu = h.mean(-1, keepdims=True)
        var = ((h - mu) ** 2).mean(-1, keepdims=True)
        return (h - mu) / np.sqrt(var + 1e-5) * w + b

    def gelu(h):
        return 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))

    h = wte[x] + s["transformer.wpe.weight"][:T]
    L = len({k.split(".")[2] for k in s if k.startswith("transformer.h.")})
    mask = np.tril(np.ones((T, T), dtype=bool))
    for i in range(L):
        P = lambda n: s[f"transformer.h.{i}.{n}"]  # noqa: E731
        a = ln(h, P("ln_1.weight"), P("ln_1.bias"))
        qkv = a @ P("attn.c_attn.weight").T + P("attn.c_attn.bias")
        q, k, v = (qkv[..., j * C:(j + 1) * C].reshape(B, T, H, hs).transpose(0, 2, 1, 3)
                   for j in range(3))
        att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs)
        att = np.where(mask, att, -np.inf)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        o = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
        h = h + o @ P("attn.c_proj.weight").T + P("attn.c_proj.bias")
        a = ln(h, P("ln_2.weight"), P("ln_2.bias"))
        f = gelu(a @ P("mlp.c_fc.weight").T + P("mlp.c_fc.bias"))
        h = h + f @ P("mlp.c_proj.weight").T + P("mlp.c_proj.bias")
    h = ln(h, s["transformer.ln_f.weight"], s["transformer.ln_f.bias"])
    logits = h @ wte.T
    m = logits.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(logits - m).sum(-1, keepdims=True)))[..., 0]
    picked = np.take_along_axis(logits, y[..., None], -1)[..., 0]
    return float(np.mean(lse - picked))


def test_model():
    m = tiny_model()
    H = m.cfg.n_head
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, m.cfg.vocab_size, (3, 5), generator=g)
    y = torch.randint(0, m.cfg.vocab_size, (3, 5), generator=g)
    state = {k: v.detach().numpy() for k, v in m.named_parameters()}
    _, loss = m(x, y)
    ref = numpy_loss(state, x.numpy(), y.numpy(), H)
    check(abs(loss.item() - ref) < 1e-10, f"model: loss {loss.item():.12f} == numpy {ref:.12f}")
    # shorter sequence than block size
    _, loss3 = m(x[:, :3], y[:, :3])
    ref3 = numpy_loss(state, x[:, :3].numpy(), y[:, :3].numpy(), H)
    check(abs(loss3.item() - ref3) < 1e-10, "model: loss with T < block_size")

    # from_numpy_state reproduces it; also in float32
    m2 = GPT.from_numpy_state(state, H, dtype=torch.float64)
    check(abs(m2(x, y)[1].item() - ref) < 1e-12, "model: from_numpy_state (f64)")
    m3 = GPT.from_numpy_state(state, H, dtype=torch.float32)
    check(abs(m3(x, y)[1].item() - ref) < 1e-5, "model: from_numpy_state (f32)")
    try:
        GPT.from_numpy_state({**state, "lm_head.weight": state["transformer.wte.weight"]}, H)
        ok = False
    except ValueError:
        ok = True
    check(ok, "model: rejects unexpected parameter")

    # gradcheck w.r.t. all parameters (tied wte is a single input)
    names = [n for n, _ in m.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for _, p in m.named_parameters())

    def f(*ps):
        return stateless.functional_call(m, dict(zip(names, ps)), (x, y))[1]

    ok = torch.autograd.gradcheck(f, params, eps=1e-6, atol=1e-6, rtol=1e-5)
    check(ok, f"model: gradcheck over {sum(p.numel() for p in params)} parameters")

    # tied gradient = sum of embedding use and LM-head use
    m.zero_grad()
    m(x, y)[1].backward()
    gw = m.transformer.wte.weight.grad.clone()
    check(gw.abs().sum() > 0, "model: wte gradient non-zero")


def test_adamw():
    m = tiny_model(seed=3)
    g = torch.Generator().manual_seed(4)
    x = torch.randint(0, m.cfg.vocab_size, (2, 5), generator=g)
    y = torch.randint(0, m.cfg.vocab_size, (2, 5), generator=g)
    lr, wd, b1, b2, eps = 3e-3, 0.1, 0.9, 0.95, 1e-8
    ref = {n: p.detach().numpy().copy() for n, p in m.named_parameters()}
    mom = {n: np.zeros_like(v) for n, v in ref.items()}
    vel = {n: np.zeros_like(v) for n, v in ref.items()}
    opt = make_adamw(m, lr, wd, betas=(b1, b2), eps=eps)
    for t in range(1, 4):
        opt.zero_grad()
        m(x, y)[1].backward()
        grads = {n: p.grad.numpy().copy() for n, p in m.named_parameters()}
        opt.step()
        for n in ref:
            d = wd if ref[n].ndim >= 2 else 0.0
            ref[n] *= 1 - lr * d
            mom[n] = b1 * mom[n] + (1 - b1) * grads[n]
            vel[n] = b2 * vel[n] + (1 - b2) * grads[n] ** 2
            mhat = mom[n] / (1 - b1 ** t)
            vhat = vel[n] / (1 - b2 ** t)
            ref[n] -= lr * mhat / (np.sqrt(vhat) + eps)
        # keep the reference on the same trajectory as torch
        err = max(np.max(np.abs(p.detach().numpy() - ref[n])) for n, p in m.named_parameters())
        check(err < 1e-12, f"adamw: step {t} matches numpy (max err {err:.1e})")
        for n, p in m.named_parameters():
            ref[n] = p.detach().numpy().copy()


def test_cli(tmp):
    V, C, T, L, H, B, K = 11, 16, 8, 2, 4, 3, 3
    m = tiny_model(L=L, C=C, H=H, T=T, V=V, seed=5, dtype=torch.float32)
    state = {n: p.detach().numpy() for n, p in m.named_parameters()}
    rng = np.random.default_rng(6)
    x = rng.integers(0, V, (B, T)).astype(np.int32)
    y = rng.integers(0, V, (B, T)).astype(np.int32)
    w, bt, out = (os.path.join(tmp, f) for f in ("w.st", "b.st", "o.st"))
    st.write(w, state)
    st.write(bt, {"x": x, "y": y})
    cli = os.path.join(HERE, "torch_gpt.py")
    base = [sys.executable, cli, "--weights", w, "--batch", bt, "--n-head", str(H),
            "--steps", str(K), "--lr", "1e-2", "--weight-decay", "0.1",
            "--beta1", "0.9", "--beta2", "0.95", "--eps", "1e-8", "--out", out]
    r = subprocess.run(base, capture_output=True, text=True)
    check(r.returncode == 0, "cli: runs" + ("" if r.returncode == 0 else ": " + r.stderr))
    if r.returncode != 0:
        return
    o = st.load(out)
    check(o["loss"].shape == (1,) and o["loss"].dtype == np.float32, "cli: loss F32[1]")
    check(o["losses"].shape == (K,), "cli: losses F32[K]")
    check(o["losses"][0] == o["loss"][0], "cli: losses[0] == loss")
    check(o["losses"][-1] < o["losses"][0], "cli: loss decreases")
    ref = numpy_loss(state, x, y, H)
    check(abs(o["loss"][0] - ref) < 1e-5, "cli: loss matches numpy")
    check(all(("grad." + n) in o and ("after." + n) in o
              and o["grad." + n].shape == state[n].shape for n in state)
          and len(o) == 2 + 2 * len(state), "cli: grad.* and after.* for every param")
    r2 = subprocess.run(base + ["--double", "--out-f64"], capture_output=True, text=True)
    o2 = st.load(out) if r2.returncode == 0 else {}
    check(r2.returncode == 0 and o2["loss"].dtype == np.float64
          and abs(o2["loss"][0] - ref) < 1e-12, "cli: --double --out-f64")
    # bad inputs
    st.write(bt, {"x": x, "y": y[:, :4]})
    r3 = subprocess.run(base, capture_output=True, text=True)
    check(r3.returncode != 0 and "error" in r3.stderr, "cli: rejects mismatched x/y")
    st.write(bt, {"x": x + V, "y": y})
    r4 = subprocess.run(base, capture_output=True, text=True)
    check(r4.returncode != 0 and "token ids" in r4.stderr, "cli: rejects out-of-range ids")
    st.write(bt, {"x": x, "y": y})
    r5 = subprocess.run(base[:7] + ["3"] + base[8:], capture_output=True, text=True)
    check(r5.returncode != 0 and "divisible" in r5.stderr, "cli: rejects bad n_head")
    bad_state = dict(state)
    del bad_state["transformer.h.1.mlp.c_fc.bias"]
    st.write(w, bad_state)
    r6 = subprocess.run(base, capture_output=True, text=True)
    check(r6.returncode != 0 and "missing" in r6.stderr, "cli: rejects missing param")


def main():
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        test_safetensors(tmp)
        test_model()
        test_adamw()
        test_cli(tmp)
        selftest_llama.run_all(check, tmp)
    if FAILURES:
        print(f"\n{len(FAILURES)} FAILURE(S)")
        return 1
    print("\nall checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
