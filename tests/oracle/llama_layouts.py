"""A llama's logits from llama2.c's checkpoint and from Hugging Face's files, computed here in
numpy from each format's own definition, must agree (tests/nn/test_llama_weights.cpp writes both
files from one random model with glass's writers).

  llama2.c (run.c): its int32[7] header, the f32 groups in run.c's order, and RoPE on adjacent
      pairs (2j, 2j+1) of each head at angle pos * theta^(-2j/D);
  Hugging Face (LlamaForCausalLM): model.safetensors + config.json, and RoPE on the two halves
      (j, j + D/2) at the same angles (rotate_half).

Neither reader shares code with glass or with the other, so agreement means glass's q/k row
permutation and group order are what run.c expects.

usage: llama_layouts.py LLAMA2C_FILE HF_DIR TOKENS   (TOKENS: comma-separated ids)
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402


def rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1 + np.exp(-x))


def attention(q, k, v, H, Hkv, D):
    """Causal grouped-query attention; q [T, H D], k and v [T, Hkv D]."""
    T = q.shape[0]
    out = np.zeros_like(q)
    for h in range(H):
        g = h // (H // Hkv)
        qh, kh, vh = q[:, h * D:(h + 1) * D], k[:, g * D:(g + 1) * D], v[:, g * D:(g + 1) * D]
        s = qh @ kh.T / np.sqrt(D)
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[:, h * D:(h + 1) * D] = (p / p.sum(axis=1, keepdims=True)) @ vh
    return out


def llama2c_logits(path, tokens, theta=10000.0, eps=1e-5):
    raw = open(path, "rb").read()
    dim, hidden, L, H, Hkv, vocab, seq_len = np.frombuffer(raw[:28], "<i4")
    shared, V, D = vocab > 0, abs(vocab), dim // H
    f = np.frombuffer(raw[28:], "<f4").astype(np.float64)
    at = 0

    def take(*shape):
        nonlocal at
        n = int(np.prod(shape))
        a = f[at:at + n].reshape(shape)
        at += n
        return a

    emb = take(V, dim)
    rms_att, wq, wk = take(L, dim), take(L, H * D, dim), take(L, Hkv * D, dim)
    wv, wo, rms_ffn = take(L, Hkv * D, dim), take(L, dim, H * D), take(L, dim)
    w1, w2, w3 = take(L, hidden, dim), take(L, dim, hidden), take(L, hidden, dim)
    rms_final = take(dim)
    take(seq_len, D // 2), take(seq_len, D // 2)  # freq_cis, recomputed as run.c does
    wcls = emb if shared else take(V, dim)
    assert at == f.size

    def rope(x):  # adjacent pairs of each head
        x = x.copy()
        for pos in range(x.shape[0]):
            for i in range(0, x.shape[1], 2):
                a = pos * theta ** (-(i % D) / D)
                x0, x1 = x[pos, i], x[pos, i + 1]
                x[pos, i], x[pos, i + 1] = x0 * np.cos(a) - x1 * np.sin(a), x0 * np.sin(a) + x1 * np.cos(a)
        return x

    x = emb[tokens]
    for l in range(L):
        xb = rmsnorm(x, rms_att[l], eps)
        q, k, v = rope(xb @ wq[l].T), rope(xb @ wk[l].T), xb @ wv[l].T
        x = x + attention(q, k, v, H, Hkv, D) @ wo[l].T
        xb = rmsnorm(x, rms_ffn[l], eps)
        x = x + (silu(xb @ w1[l].T) * (xb @ w3[l].T)) @ w2[l].T
    return rmsnorm(x, rms_final, eps) @ wcls.T


def hf_logits(directory, tokens):
    cfg = json.load(open(os.path.join(directory, "config.json")))
    t = {k: v.astype(np.float64) for k, v in safetensors_io.load(os.path.join(directory, "model.safetensors")).items()}
    H, Hkv, C = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["hidden_size"]
    D, eps, theta = C // H, cfg["rms_norm_eps"], cfg["rope_theta"]
    T = len(tokens)
    inv_freq = theta ** (-np.arange(0, D, 2) / D)
    angles = np.outer(np.arange(T), inv_freq)
    cos, sin = np.tile(np.cos(angles), 2), np.tile(np.sin(angles), 2)  # [T, D]

    def rope(x, heads):  # the two halves of each head (rotate_half)
        x = x.reshape(T, heads, D)
        rotated = np.concatenate([-x[..., D // 2:], x[..., :D // 2]], axis=-1)
        return (x * cos[:, None] + rotated * sin[:, None]).reshape(T, heads * D)

    x = t["model.embed_tokens.weight"][tokens]
    for l in range(cfg["num_hidden_layers"]):
        p = lambda n: t["model.layers.%d.%s" % (l, n)]
        xb = rmsnorm(x, p("input_layernorm.weight"), eps)
        q = rope(xb @ p("self_attn.q_proj.weight").T, H)
        k = rope(xb @ p("self_attn.k_proj.weight").T, Hkv)
        v = xb @ p("self_attn.v_proj.weight").T
        x = x + attention(q, k, v, H, Hkv, D) @ p("self_attn.o_proj.weight").T
        xb = rmsnorm(x, p("post_attention_layernorm.weight"), eps)
        x = x + (silu(xb @ p("mlp.gate_proj.weight").T) * (xb @ p("mlp.up_proj.weight").T)) @ p("mlp.down_proj.weight").T
    head = t["lm_head.weight"] if "lm_head.weight" in t else t["model.embed_tokens.weight"]
    return rmsnorm(x, t["model.norm.weight"], eps) @ head.T


def main():
    llama2c, hf_dir, tokens = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3].split(",")]
    a, b = llama2c_logits(llama2c, tokens), hf_logits(hf_dir, tokens)
    err = np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30)
    print("llama2.c vs Hugging Face logits: max relative difference %.3g over %s" % (err, a.shape))
    # A wrong permutation moves whole rows: differences of order 1, not rounding's 1e-12.
    sys.exit(0 if err < 1e-9 and np.max(np.abs(b)) > 1e-3 else 1)


if __name__ == "__main__":
    main()
