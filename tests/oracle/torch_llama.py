#!/usr/bin/python3
"""PyTorch reference oracle for glass's Llama (train_gpt --arch llama).

Written from the definitions of the architecture, with glass's parameter
names (glass fuses q/k/v and gate/up into one matrix each):

    h = embed_tokens[ids]                                    [B, T, C]
    per layer:  h = h + attn(rmsnorm(h, input_layernorm))
                h = h + mlp(rmsnorm(h, post_attention_layernorm))
    logits = rmsnorm(h, norm) @ W^T,  W = lm_head, or embed_tokens when tied
    loss = mean cross-entropy over B*T

  rmsnorm(x, w) = x * rsqrt(mean(x^2) + eps) * w, over the last dim, computed
      in f32 (f64 under --double) whatever the input's dtype.
  attn: qkv = x @ qkv_proj^T, rows [q: H*D | k: Hkv*D | v: Hkv*D], D = C/H;
      RoPE on q and k (Hugging Face's rotate-half): per head, with
      inv_freq[i] = 1 / theta^(2i/D) (i < D/2, in f32 as Hugging Face does;
      f64 under --double), angle[t, i] = t * inv_freq[i],
          rope(x) = x * cos + rotate_half(x) * sin,  rotate_half(x) = [-x2, x1]
      (x1, x2 the two halves of the head, cos/sin of [angle, angle]);
      grouped-query attention: query head h reads key/value head
      h // (H / Hkv); softmax(q k^T / sqrt(D), causal) v, heads concatenated
      -> o_proj.
  mlp: [gate | up] = x @ gate_up_proj^T (F columns each),
      out = down_proj(silu(gate) * up).
No biases anywhere.

Parameters (shapes; V vocabulary, C width, F SwiGLU hidden size):
    model.embed_tokens.weight                       [V, C]
    model.layers.{i}.input_layernorm.weight         [C]
    model.layers.{i}.self_attn.qkv_proj.weight      [(H + 2 Hkv) D, C]
    model.layers.{i}.self_attn.o_proj.weight        [C, C]
    model.layers.{i}.post_attention_layernorm.weight [C]
    model.layers.{i}.mlp.gate_up_proj.weight        [2F, C]
    model.layers.{i}.mlp.down_proj.weight           [C, F]
    model.norm.weight                               [C]
    lm_head.weight                                  [V, C]  only when untied
Optimizer: torch.optim.AdamW, weight decay only on params with dim >= 2 (the
matrices and embeddings; never the RMSNorm weights), as glass's optim/.

Library use:
    from torch_llama import Llama, LlamaConfig, config_from_state
    model = Llama.from_numpy_state(state, n_head, n_kv_head)
    logits, loss = model(x, y)

CLI (run with Debian's /usr/bin/python3, which has torch):
    /usr/bin/python3 tests/oracle/torch_llama.py --weights W.safetensors \\
        --batch X.safetensors --n-head H --n-kv-head HKV [--rope-theta 10000]
        [--norm-eps 1e-5] --steps K --lr LR --weight-decay WD --beta1 B1
        --beta2 B2 --eps EPS --out OUT.safetensors [--double] [--out-f64]
        [--threads N]
  W: every parameter by the names above (F32/BF16/F64); L, C, V, F and
     whether lm_head is tied come from the file; H, Hkv, theta and eps from
     the flags (--n-kv-head defaults to --n-head). X: "x" and "y", I32 [B, T]
     (any T: RoPE has no table).
  OUT (F32 unless --out-f64), as torch_gpt.py:
     "loss"          [1]  loss of the first forward at the initial weights
     "grad.<name>"        gradient at the initial weights (a tied
                          embed_tokens: both uses summed)
     "losses"        [K]  loss before each of K AdamW steps on the same batch
     "after.<name>"       every parameter after the K steps
  Exit status 2 with a message on stderr on bad input.
"""

import argparse
import math
import os
import sys
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt import (add_oracle_args, check_token_ids, load_numpy_state,  # noqa: E402
                       read_oracle_inputs, record_training, write_oracle_outputs)


@dataclass
class LlamaConfig:
    n_layer: int
    n_head: int
    n_kv_head: int
    n_embd: int
    vocab_size: int
    ffn_hidden: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = True

    @property
    def head_dim(self):
        return self.n_embd // self.n_head

    def validate(self):
        """ValueError naming the bad field."""
        for k in ("n_layer", "n_head", "n_kv_head", "n_embd", "vocab_size", "ffn_hidden"):
            if getattr(self, k) <= 0:
                raise ValueError(f"{k} must be positive, got {getattr(self, k)}")
        if self.n_embd % self.n_head != 0:
            raise ValueError(f"n_embd {self.n_embd} is not divisible by n_head {self.n_head}")
        if self.n_head % self.n_kv_head != 0:
            raise ValueError(f"n_kv_head {self.n_kv_head} does not divide "
                             f"n_head {self.n_head}")
        if self.head_dim % 2 != 0:
            raise ValueError(f"head dim {self.head_dim} (n_embd {self.n_embd} / n_head "
                             f"{self.n_head}) is odd: RoPE rotates pairs of halves")
        if not self.rope_theta > 0:
            raise ValueError(f"rope_theta must be positive, got {self.rope_theta}")
        if not self.norm_eps >= 0:
            raise ValueError(f"norm_eps must be >= 0, got {self.norm_eps}")


def rms_norm(x, weight, eps):
    """x * rsqrt(mean(x^2) + eps) * weight over the last dim, in at least f32."""
    dt = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(dt)
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * weight.to(dt)).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


def rope_cos_sin(T, D, theta, dtype):
    """cos and sin [T, D] of angle[t, i] = t / theta^(2i/D), each repeated for
    the two halves. The table is computed in f32 (Hugging Face's inv_freq),
    in f64 when dtype is f64, then cast to dtype."""
    table = torch.float64 if dtype == torch.float64 else torch.float32
    inv_freq = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=table) / D))  # [D/2]
    angle = torch.arange(T, dtype=table)[:, None] * inv_freq[None, :]  # [T, D/2]
    angle = torch.cat([angle, angle], dim=-1)  # [T, D]
    return angle.cos().to(dtype), angle.sin().to(dtype)


def rotate_half(x):
    """[x1, x2] -> [-x2, x1] over the two halves of the last dim."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(x, cos, sin):
    """x [B, heads, T, D]; cos, sin [T, D]."""
    return x * cos + rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        D = cfg.head_dim
        self.qkv_proj = nn.Linear(cfg.n_embd, (cfg.n_head + 2 * cfg.n_kv_head) * D, bias=False)
        self.o_proj = nn.Linear(cfg.n_head * D, cfg.n_embd, bias=False)

    def forward(self, x):
        B, T, _ = x.shape
        H, Hkv, D = self.cfg.n_head, self.cfg.n_kv_head, self.cfg.head_dim
        q, k, v = self.qkv_proj(x).split([H * D, Hkv * D, Hkv * D], dim=-1)
        q = q.view(B, T, H, D).transpose(1, 2)  # [B, H, T, D]
        k = k.view(B, T, Hkv, D).transpose(1, 2)  # [B, Hkv, T, D]
        v = v.view(B, T, Hkv, D).transpose(1, 2)
        cos, sin = rope_cos_sin(T, D, self.cfg.rope_theta, x.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        group = H // Hkv  # query head h reads key/value head h // group
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        att = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, H * D)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ffn = cfg.ffn_hidden
        self.gate_up_proj = nn.Linear(cfg.n_embd, 2 * cfg.ffn_hidden, bias=False)
        self.down_proj = nn.Linear(cfg.ffn_hidden, cfg.n_embd, bias=False)

    def forward(self, x):
        gate, up = self.gate_up_proj(x).split(self.ffn, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.n_embd, cfg.norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.n_embd, cfg.norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        self.model = nn.ModuleDict(dict(
            embed_tokens=nn.Embedding(cfg.vocab_size, cfg.n_embd),
            layers=nn.ModuleList([DecoderLayer(cfg) for _ in range(cfg.n_layer)]),
            norm=RMSNorm(cfg.n_embd, cfg.norm_eps),
        ))
        if not cfg.tie_embeddings:
            self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)

    def head_weight(self):
        if self.cfg.tie_embeddings:
            return self.model.embed_tokens.weight
        return self.lm_head.weight

    def forward(self, idx, targets=None):
        B, T = idx.shape
        x = self.model.embed_tokens(idx)
        for layer in self.model.layers:
            x = layer(x)
        logits = self.model.norm(x) @ self.head_weight().t()
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(B * T, -1), targets.reshape(B * T))
        return logits, loss

    @classmethod
    def from_numpy_state(cls, state, n_head, n_kv_head=None, rope_theta=10000.0,
                         norm_eps=1e-5, dtype=torch.float32):
        """Build a model from name -> np.ndarray (the names above). Raises
        ValueError describing any missing/unexpected/misshaped entries."""
        cfg = config_from_state(state, n_head, n_kv_head, rope_theta, norm_eps)
        model = cls(cfg).to(dtype)
        load_numpy_state(model, state)
        return model


def config_from_state(state, n_head, n_kv_head=None, rope_theta=10000.0, norm_eps=1e-5):
    """LlamaConfig from the parameter shapes and the flags the file cannot
    tell (heads, theta, eps); validates layer numbering and that the first
    layer's fused matrices agree with the head counts."""
    emb_name = "model.embed_tokens.weight"
    if emb_name not in state:
        raise ValueError(f"missing parameter {emb_name!r}")
    emb = np.asarray(state[emb_name])
    if emb.ndim != 2:
        raise ValueError(f"{emb_name} must be 2-D, got shape {list(emb.shape)}")
    V, C = emb.shape
    layers = set()
    for k in state:
        if k.startswith("model.layers."):
            idx = k.split(".")[2]
            if not idx.isdigit():
                raise ValueError(f"bad layer index in {k!r}")
            layers.add(int(idx))
    L = len(layers)
    if L == 0 or layers != set(range(L)):
        raise ValueError(f"layer indices are not 0..{max(L - 1, 0)}: {sorted(layers)}")
    if n_kv_head is None:
        n_kv_head = n_head
    if n_head <= 0 or C % n_head != 0:
        raise ValueError(f"n_embd {C} is not divisible by n_head {n_head}")
    if n_kv_head <= 0 or n_head % n_kv_head != 0:
        raise ValueError(f"n_kv_head {n_kv_head} does not divide n_head {n_head}")
    D = C // n_head
    if D % 2 != 0:
        raise ValueError(f"head dim {D} (n_embd {C} / n_head {n_head}) is odd: RoPE rotates "
                         f"pairs of halves")
    qkv_name = "model.layers.0.self_attn.qkv_proj.weight"
    gu_name = "model.layers.0.mlp.gate_up_proj.weight"
    for k in (qkv_name, gu_name):
        if k not in state:
            raise ValueError(f"missing parameter {k!r}")
        if np.ndim(state[k]) != 2:
            raise ValueError(f"{k} must be 2-D, got shape {list(np.shape(state[k]))}")
    rows = np.shape(state[qkv_name])[0]
    if rows != (n_head + 2 * n_kv_head) * D:
        raise ValueError(
            f"{qkv_name} has {rows} rows, but n_head {n_head} and n_kv_head {n_kv_head} "
            f"with head dim {D} need (n_head + 2 n_kv_head) * head_dim = "
            f"{(n_head + 2 * n_kv_head) * D}")
    gu_rows = np.shape(state[gu_name])[0]
    if gu_rows % 2 != 0:
        raise ValueError(f"{gu_name} has {gu_rows} rows: gate and up need an even count")
    cfg = LlamaConfig(n_layer=L, n_head=n_head, n_kv_head=n_kv_head, n_embd=C, vocab_size=V,
                      ffn_hidden=gu_rows // 2, rope_theta=rope_theta, norm_eps=norm_eps,
                      tie_embeddings="lm_head.weight" not in state)
    cfg.validate()
    return cfg


def run_oracle(state, x, y, n_head, n_kv_head, rope_theta, norm_eps, steps, lr,
               weight_decay, beta1, beta2, eps, dtype=torch.float32):
    """Returns dict name -> np.ndarray with loss, grad.*, losses, after.*"""
    model = Llama.from_numpy_state(state, n_head, n_kv_head, rope_theta, norm_eps, dtype=dtype)
    return record_training(model, x, y, steps, lr, weight_decay, beta1, beta2, eps)


def _fail(msg):
    print(f"torch_llama.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_oracle_args(ap)
    ap.add_argument("--n-head", type=int, required=True)
    ap.add_argument("--n-kv-head", type=int, default=0, help="0 = --n-head")
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--norm-eps", type=float, default=1e-5)
    a = ap.parse_args(argv)
    try:
        state, x, y = read_oracle_inputs(a)
        n_kv_head = a.n_kv_head or a.n_head
        cfg = config_from_state(state, a.n_head, n_kv_head, a.rope_theta, a.norm_eps)
        check_token_ids(x, y, cfg.vocab_size)
        dtype = torch.float64 if a.double else torch.float32
        out = run_oracle(state, x, y, a.n_head, n_kv_head, a.rope_theta, a.norm_eps, a.steps,
                         a.lr, a.weight_decay, a.beta1, a.beta2, a.eps, dtype=dtype)
        write_oracle_outputs(a, out, {
            "arch": "llama", "n_layer": cfg.n_layer, "n_head": cfg.n_head,
            "n_kv_head": cfg.n_kv_head, "n_embd": cfg.n_embd, "vocab_size": cfg.vocab_size,
            "ffn_hidden": cfg.ffn_hidden, "rope_theta": cfg.rope_theta,
            "norm_eps": cfg.norm_eps, "tie_embeddings": cfg.tie_embeddings})
    except ValueError as e:
        _fail(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
