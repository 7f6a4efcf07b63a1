#!/usr/bin/python3
"""GPT-2 weights in Hugging Face's and llm.c's layouts, written and read by an
implementation independent of glass's, with PyTorch's logits (torch_gpt.GPT).

Hugging Face (transformers' GPT-2 state dict, as in the Hub's model.safetensors):
    wte.weight [V, C], wpe.weight [T, C], h.N.ln_1.{weight,bias},
    h.N.attn.c_attn.{weight [C, 3C], bias}, h.N.attn.c_proj.{weight [C, C], bias},
    h.N.ln_2.*, h.N.mlp.c_fc.{weight [C, 4C], bias}, h.N.mlp.c_proj.{weight [4C, C], bias},
    ln_f.{weight,bias}; the four matrices are Conv1D weights, [in, out], the
    transpose of nn.Linear's. Optionally a "transformer." prefix on every name,
    "lm_head.weight" (= wte) and the causal-mask buffers h.N.attn.bias
    [1, 1, T, T] and h.N.attn.masked_bias (older transformers saved them).
llm.c (train_gpt2.c's checkpoint): int32 header[256] = magic 20240326,
    version (3: f32, 5: bf16), maxT, V, L, H, C, Vp; then wte [Vp, C] (rows past
    V zero), wpe, and for each of ln_1.w, ln_1.b, c_attn.w, c_attn.b,
    attn.c_proj.w, attn.c_proj.b, ln_2.w, ln_2.b, c_fc.w, c_fc.b, mlp.c_proj.w,
    mlp.c_proj.b all L layers back to back; then ln_f.w, ln_f.b. Matrices are
    [out, in].

CLI (Debian's /usr/bin/python3, which has torch):
  gpt2_layouts.py write --out-dir D [--seed S] [--vocab 65] [--block 16]
        [--layers 2] [--heads 4] [--embd 32] [--batch 3]
    A random GPT (every parameter random, biases and LayerNorms included) in
    D/hf.safetensors (no prefix, mask buffers), D/hf_prefixed.safetensors
    ("transformer." prefix, lm_head.weight), D/llmc.bin (version 3, V padded to
    a multiple of 64), D/llmc_bf16.bin (version 5); a batch and PyTorch's
    logits in D/oracle.safetensors: "x" I32 [B, T], "logits" F32 [B, T, V] of
    the f32 weights, "logits_bf16" of the weights rounded to bf16 by torch.
  gpt2_layouts.py logits [--hf F --n-head H] [--llmc G] --batch X.safetensors
        --out O.safetensors
    Reads F (Hugging Face's layout; H heads) and G (llm.c's) with this file's
    own readers and writes PyTorch's logits F32 [B, T, V] of each for X's "x":
    "logits.hf", "logits.llmc".
  Exit status 2 with a message on stderr on bad input.
"""

import argparse
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io as st  # noqa: E402
from torch_gpt import GPT, GPTConfig  # noqa: E402

LLMC_MAGIC = 20240326
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight",
          "mlp.c_proj.weight")
LAYER_ORDER = ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight",
               "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
               "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
               "mlp.c_proj.weight", "mlp.c_proj.bias")


def _fail(msg):
    print(f"gpt2_layouts.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def random_model(cfg, seed):
    torch.manual_seed(seed)
    model = GPT(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".ln_" in name or "ln_f" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0)
                        + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.1)
    return model


def nanogpt_state(model):
    return {n: p.detach().numpy().copy() for n, p in model.named_parameters()}


def to_hf(state, prefix="", with_buffers=False, with_lm_head=False, T=None):
    out = {}
    for name, a in state.items():
        short = name[len("transformer."):]
        out[prefix + short] = a.T.copy() if short.endswith(CONV1D) else a
        if with_buffers and short.endswith("ln_1.weight"):
            layer = short[: -len("ln_1.weight")]
            mask = np.tril(np.ones((T, T), np.float32)).reshape(1, 1, T, T)
            out[prefix + layer + "attn.bias"] = mask
            out[prefix + layer + "attn.masked_bias"] = np.array(-1e4, np.float32)
    if with_lm_head:
        out["lm_head.weight"] = state["transformer.wte.weight"]
    return out


def from_hf(tensors):
    state = {}
    for name, a in tensors.items():
        short = name[len("transformer."):] if name.startswith("transformer.") else name
        if short == "lm_head.weight" or short.endswith((".attn.bias", ".attn.masked_bias")):
            continue
        state["transformer." + short] = a.T.copy() if short.endswith(CONV1D) else a
    return state


def llmc_bytes(state, cfg, Vp, bf16):
    header = np.zeros(256, np.int32)
    header[:8] = [LLMC_MAGIC, 5 if bf16 else 3, cfg.block_size, cfg.vocab_size,
                  cfg.n_layer, cfg.n_head, cfg.n_embd, Vp]
    wte = np.zeros((Vp, cfg.n_embd), np.float32)
    wte[: cfg.vocab_size] = state["transformer.wte.weight"]
    parts = [wte, state["transformer.wpe.weight"]]
    for suffix in LAYER_ORDER:
        parts += [state[f"transformer.h.{l}.{suffix}"] for l in range(cfg.n_layer)]
    parts += [state["transformer.ln_f.weight"], state["transformer.ln_f.bias"]]
    blob = header.tobytes()
    for p in parts:
        p = np.ascontiguousarray(p, np.float32)
        blob += (st.f32_to_bf16_bits(p) if bf16 else p).tobytes()
    return blob


def from_llmc(blob):
    header = np.frombuffer(blob[:1024], np.int32)
    if header[0] != LLMC_MAGIC or header[1] not in (3, 5):
        raise ValueError(f"not an llm.c checkpoint (magic {header[0]}, version {header[1]})")
    T, V, L, H, C, Vp = (int(v) for v in header[2:8])
    bf16 = header[1] == 5
    data = blob[1024:]
    dt = np.uint16 if bf16 else np.float32
    at = 0

    def take(shape):
        nonlocal at
        n = int(np.prod(shape))
        a = np.frombuffer(data, dt, count=n, offset=at * (2 if bf16 else 4)).reshape(shape)
        at += n
        return st.bf16_bits_to_f32(a) if bf16 else a.copy()

    shapes = {"ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (3 * C, C),
              "attn.c_attn.bias": (3 * C,), "attn.c_proj.weight": (C, C),
              "attn.c_proj.bias": (C,), "ln_2.weight": (C,), "ln_2.bias": (C,),
              "mlp.c_fc.weight": (4 * C, C), "mlp.c_fc.bias": (4 * C,),
              "mlp.c_proj.weight": (C, 4 * C), "mlp.c_proj.bias": (C,)}
    state = {"transformer.wte.weight": take((Vp, C))[:V].copy(),
             "transformer.wpe.weight": take((T, C))}
    for suffix in LAYER_ORDER:
        for l in range(L):
            state[f"transformer.h.{l}.{suffix}"] = take(shapes[suffix])
    state["transformer.ln_f.weight"] = take((C,))
    state["transformer.ln_f.bias"] = take((C,))
    if at * (2 if bf16 else 4) != len(data):
        raise ValueError(f"{len(data)} bytes of parameters, expected {at * (2 if bf16 else 4)}")
    return state, H


def logits_of(state, n_head, x):
    model = GPT.from_numpy_state(state, n_head)
    with torch.no_grad():
        logits, _ = model(torch.from_numpy(x.astype(np.int64)))
    return logits.numpy().astype(np.float32)


def cmd_write(a):
    cfg = GPTConfig(n_layer=a.layers, n_head=a.heads, n_embd=a.embd,
                    vocab_size=a.vocab, block_size=a.block)
    model = random_model(cfg, a.seed)
    state = nanogpt_state(model)
    os.makedirs(a.out_dir, exist_ok=True)
    d = a.out_dir
    st.write(os.path.join(d, "hf.safetensors"),
             to_hf(state, with_buffers=True, T=cfg.block_size), metadata={"format": "pt"})
    st.write(os.path.join(d, "hf_prefixed.safetensors"),
             to_hf(state, prefix="transformer.", with_lm_head=True), metadata={"format": "pt"})
    Vp = (cfg.vocab_size + 63) // 64 * 64
    for name, bf16 in (("llmc.bin", False), ("llmc_bf16.bin", True)):
        with open(os.path.join(d, name), "wb") as f:
            f.write(llmc_bytes(state, cfg, Vp, bf16))
    g = np.random.default_rng(a.seed)
    x = g.integers(0, cfg.vocab_size, size=(a.batch, cfg.block_size)).astype(np.int32)
    # torch's own f32 -> bf16 rounding, independent of the writer's bit arithmetic
    rounded = {n: torch.from_numpy(v).to(torch.bfloat16).to(torch.float32).numpy()
               for n, v in state.items()}
    st.write(os.path.join(d, "oracle.safetensors"),
             {"x": x, "logits": logits_of(state, cfg.n_head, x),
              "logits_bf16": logits_of(rounded, cfg.n_head, x)},
             metadata={"n_head": str(cfg.n_head), "torch_version": torch.__version__})


def cmd_logits(a):
    out = {}
    try:
        x = st.load(a.batch)["x"]
        if a.hf:
            out["logits.hf"] = logits_of(from_hf(st.load(a.hf)), a.n_head, x)
        if a.llmc:
            with open(a.llmc, "rb") as f:
                state, n_head = from_llmc(f.read())
            out["logits.llmc"] = logits_of(state, n_head, x)
    except (OSError, ValueError, KeyError) as e:
        _fail(str(e))
    st.write(a.out, out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("--out-dir", required=True)
    w.add_argument("--seed", type=int, default=1234)
    for flag, default in (("--vocab", 65), ("--block", 16), ("--layers", 2), ("--heads", 4),
                          ("--embd", 32), ("--batch", 3)):
        w.add_argument(flag, type=int, default=default)
    r = sub.add_parser("logits")
    r.add_argument("--hf")
    r.add_argument("--llmc")
    r.add_argument("--n-head", type=int, default=0)
    r.add_argument("--batch", required=True)
    r.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    cmd_write(a) if a.cmd == "write" else cmd_logits(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
