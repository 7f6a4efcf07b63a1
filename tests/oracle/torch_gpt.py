#!/usr/bin/python3
"""PyTorch reference oracle for glass's character GPT (nanoGPT-style).

Model: GPT-2 pre-LayerNorm transformer with nanoGPT parameter names
(transformer.wte/wpe, transformer.h.{i}.{ln_1,attn.c_attn,attn.c_proj,ln_2,
mlp.c_fc,mlp.c_proj}, transformer.ln_f). LM head tied to wte (no bias, no
lm_head entry). LayerNorm eps 1e-5, GELU tanh approximation, causal attention
written by hand (torch 1.13), dropout 0, loss = mean cross-entropy over B*T.
Optimizer: torch.optim.AdamW, weight decay only on params with dim >= 2.

Library use:
    from torch_gpt import (GPT, GPTConfig, config_from_state, make_adamw,
                           record_training)
    model = GPT.from_numpy_state(state, n_head)   # state: name -> np.ndarray
    logits, loss = model(x, y)
    out = record_training(model, x, y, steps, lr, wd, beta1, beta2, eps)
The CLI helpers (add_oracle_args, read_oracle_inputs, check_token_ids,
write_oracle_outputs) and record_training are shared with torch_llama.py.

CLI (run with Debian's /usr/bin/python3, which has torch):
    /usr/bin/python3 tests/oracle/torch_gpt.py --weights W.safetensors \
        --batch X.safetensors --n-head H --steps K --lr LR --weight-decay WD \
        --beta1 B1 --beta2 B2 --eps EPS --out OUT.safetensors [--double]
        [--out-f64] [--threads N]
  W: every parameter by nanoGPT name (F32/BF16/F64); L, C, V, T come from
     the shapes. X: "x" and "y", I32 [B, t] with t <= T.
  OUT (F32 unless --out-f64):
     "loss"          [1]  loss of the first forward at the initial weights
     "grad.<name>"        gradient at the initial weights (wte: both uses)
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

LN_EPS = 1e-5


@dataclass
class GPTConfig:
    n_layer: int
    n_head: int
    n_embd: int
    vocab_size: int
    block_size: int


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg.n_embd
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        mask = torch.tril(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        H = self.n_head
        hs = C // H
        q, k, v = self.c_attn(x).split(C, dim=-1)
        q = q.view(B, T, H, hs).transpose(1, 2)  # [B,H,T,hs]
        k = k.view(B, T, H, hs).transpose(1, 2)
        v = v.view(B, T, H, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg.n_embd
        self.c_fc = nn.Linear(C, 4 * C)
        self.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=LN_EPS)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=LN_EPS)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        if cfg.n_embd % cfg.n_head != 0:
            raise ValueError(f"n_embd {cfg.n_embd} not divisible by n_head {cfg.n_head}")
        self.cfg = cfg
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
            wpe=nn.Embedding(cfg.block_size, cfg.n_embd),
            h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),
            ln_f=nn.LayerNorm(cfg.n_embd, eps=LN_EPS),
        ))

    def init_weights_nanogpt(self, generator=None):
        """normal(0,0.02) for linear/embedding weights, zero biases, LN weight 1
        / bias 0, c_proj weights normal(0, 0.02/sqrt(2L))."""
        proj_std = 0.02 / math.sqrt(2 * self.cfg.n_layer)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if ".ln_" in name or name.startswith("transformer.ln_f"):
                    if name.endswith(".weight"):
                        p.fill_(1.0)
                    else:
                        p.zero_()
                elif name.endswith(".bias"):
                    p.zero_()
                elif name.endswith("c_proj.weight"):
                    p.normal_(0.0, proj_std, generator=generator)
                else:
                    p.normal_(0.0, 0.02, generator=generator)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        if T > self.cfg.block_size:
            raise ValueError(f"sequence length {T} > block size {self.cfg.block_size}")
        tr = self.transformer
        pos = torch.arange(T, device=idx.device)
        x = tr.wte(idx) + tr.wpe(pos)
        for block in tr.h:
            x = block(x)
        x = tr.ln_f(x)
        logits = x @ tr.wte.weight.t()  # tied LM head, no bias
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(B * T, -1), targets.reshape(B * T))
        return logits, loss

    @classmethod
    def from_numpy_state(cls, state, n_head, dtype=torch.float32):
        """Build a model from name -> np.ndarray (nanoGPT names). Raises
        ValueError describing any missing/unexpected/misshaped entries."""
        cfg = config_from_state(state, n_head)
        model = cls(cfg).to(dtype)
        load_numpy_state(model, state)
        return model


def config_from_state(state, n_head):
    """Infer GPTConfig from parameter shapes; validates layer numbering."""
    for k in ("transformer.wte.weight", "transformer.wpe.weight"):
        if k not in state:
            raise ValueError(f"missing parameter {k!r}")
    wte = np.asarray(state["transformer.wte.weight"])
    wpe = np.asarray(state["transformer.wpe.weight"])
    if wte.ndim != 2 or wpe.ndim != 2:
        raise ValueError("wte/wpe must be 2-D")
    V, C = wte.shape
    T, C2 = wpe.shape
    if C != C2:
        raise ValueError(f"wte has n_embd {C} but wpe has {C2}")
    layers = set()
    for k in state:
        if k.startswith("transformer.h."):
            idx = k.split(".")[2]
            if not idx.isdigit():
                raise ValueError(f"bad layer index in {k!r}")
            layers.add(int(idx))
    L = len(layers)
    if layers != set(range(L)):
        raise ValueError(f"layer indices are not 0..{L - 1}: {sorted(layers)}")
    if n_head <= 0 or C % n_head != 0:
        raise ValueError(f"n_embd {C} is not divisible by n_head {n_head}")
    return GPTConfig(n_layer=L, n_head=n_head, n_embd=C, vocab_size=V, block_size=T)


def load_numpy_state(model, state):
    expected = dict(model.named_parameters())
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    errors = []
    if missing:
        errors.append("missing: " + ", ".join(missing))
    if unexpected:
        errors.append("unexpected: " + ", ".join(unexpected))
    for name, p in expected.items():
        if name in state and tuple(np.shape(state[name])) != tuple(p.shape):
            errors.append(f"{name}: shape {tuple(np.shape(state[name]))}, "
                          f"expected {tuple(p.shape)}")
    if errors:
        raise ValueError("weights do not match the model: " + "; ".join(errors))
    with torch.no_grad():
        for name, p in expected.items():
            arr = np.asarray(state[name])
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{name}: contains non-finite values")
            p.copy_(torch.from_numpy(np.ascontiguousarray(arr)).to(p.dtype))


def make_adamw(model, lr, weight_decay, betas=(0.9, 0.95), eps=1e-8):
    """AdamW with weight decay only on params with dim >= 2."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps)


def record_training(model, x, y, steps, lr, weight_decay, beta1, beta2, eps):
    """The oracle's outputs for `model` on the batch (x, y) (int arrays [B, T]):
    dict name -> np.ndarray with "loss" and "grad.<name>" at the current
    weights, "losses" before each of `steps` AdamW steps (make_adamw) on that
    batch, and "after.<name>" once they are done. Shared by every oracle model
    (torch_gpt.py, torch_llama.py): model(x, y) must return (logits, loss)."""
    xt = torch.from_numpy(np.asarray(x, dtype=np.int64))
    yt = torch.from_numpy(np.asarray(y, dtype=np.int64))
    out = {}
    model.zero_grad(set_to_none=True)
    _, loss = model(xt, yt)
    loss.backward()
    out["loss"] = np.array([loss.item()])
    for name, p in model.named_parameters():
        out["grad." + name] = p.grad.detach().numpy().copy()
    opt = make_adamw(model, lr, weight_decay, betas=(beta1, beta2), eps=eps)
    losses = []
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        _, loss = model(xt, yt)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out["losses"] = np.array(losses)
    for name, p in model.named_parameters():
        out["after." + name] = p.detach().numpy().copy()
    return out


def run_oracle(state, x, y, n_head, steps, lr, weight_decay, beta1, beta2, eps,
               dtype=torch.float32):
    """Returns dict name -> np.ndarray with loss, grad.*, losses, after.*"""
    model = GPT.from_numpy_state(state, n_head, dtype=dtype)
    return record_training(model, x, y, steps, lr, weight_decay, beta1, beta2, eps)


def add_oracle_args(ap):
    """The flags every oracle CLI shares (files, AdamW, precision, threads)."""
    ap.add_argument("--weights", required=True)
    ap.add_argument("--batch", required=True)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--eps", type=float, default=1e-8)
    ap.add_argument("--out", required=True)
    ap.add_argument("--double", action="store_true",
                    help="compute in float64 instead of float32")
    ap.add_argument("--out-f64", action="store_true",
                    help="store outputs as F64 instead of F32")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch intra-op threads (0 = torch default)")


def read_oracle_inputs(a):
    """Checks the shared flags and reads the weights and the batch: returns
    (state, x, y) or raises ValueError with the message for the user."""
    import safetensors_io as st

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    if a.steps < 0:
        raise ValueError("--steps must be >= 0")
    if not (a.lr >= 0 and a.weight_decay >= 0 and a.eps > 0
            and 0 <= a.beta1 < 1 and 0 <= a.beta2 < 1):
        raise ValueError("invalid optimizer hyper-parameters")
    try:
        state = st.load(a.weights)
    except (OSError, st.SafetensorsError) as e:
        raise ValueError(f"cannot read weights: {e}") from None
    try:
        batch = st.load(a.batch)
    except (OSError, st.SafetensorsError) as e:
        raise ValueError(f"cannot read batch: {e}") from None
    for k in ("x", "y"):
        if k not in batch:
            raise ValueError(f"batch file has no tensor {k!r} (has {sorted(batch)})")
        if batch[k].dtype != np.int32 or batch[k].ndim != 2:
            raise ValueError(f"batch {k!r} must be I32 [B,T], got {batch[k].dtype} "
                             f"{list(batch[k].shape)}")
    x, y = batch["x"], batch["y"]
    if x.shape != y.shape or x.size == 0:
        raise ValueError(f"x {list(x.shape)} and y {list(y.shape)} must be equal, non-empty")
    return state, x, y


def check_token_ids(x, y, vocab_size):
    for k, v in (("x", x), ("y", y)):
        if v.min() < 0 or v.max() >= vocab_size:
            raise ValueError(f"batch {k!r} has token ids outside [0, {vocab_size})")


def write_oracle_outputs(a, out, meta):
    """Writes the outputs (F32, or F64 with --out-f64) and the run's metadata."""
    import safetensors_io as st

    np_out = np.float64 if a.out_f64 else np.float32
    out = {k: np.asarray(v, dtype=np_out) for k, v in out.items()}
    meta = {**meta, "steps": a.steps, "compute_dtype": "f64" if a.double else "f32",
            "torch_version": torch.__version__}
    try:
        st.write(a.out, out, metadata=meta)
    except OSError as e:
        raise ValueError(f"cannot write output: {e}") from None


def _fail(msg):
    print(f"torch_gpt.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def main(argv=None):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_oracle_args(ap)
    ap.add_argument("--n-head", type=int, required=True)
    a = ap.parse_args(argv)
    try:
        state, x, y = read_oracle_inputs(a)
        cfg = config_from_state(state, a.n_head)
        if x.shape[1] > cfg.block_size:
            raise ValueError(f"batch T={x.shape[1]} exceeds block size {cfg.block_size} (wpe rows)")
        check_token_ids(x, y, cfg.vocab_size)
        dtype = torch.float64 if a.double else torch.float32
        out = run_oracle(state, x, y, a.n_head, a.steps, a.lr, a.weight_decay,
                         a.beta1, a.beta2, a.eps, dtype=dtype)
        write_oracle_outputs(a, out, {
            "n_layer": cfg.n_layer, "n_head": cfg.n_head, "n_embd": cfg.n_embd,
            "vocab_size": cfg.vocab_size, "block_size": cfg.block_size})
    except ValueError as e:
        _fail(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
