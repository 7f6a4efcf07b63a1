#!/usr/bin/python3
"""PyTorch half of the glass training benchmark: character GPT or Llama on a text file.

--arch gpt2 (default) trains the same model as glass's GPT
(tests/oracle/torch_gpt.py: nanoGPT-style pre-LN GPT, tied LM head, GELU tanh);
--arch llama the same model as train_gpt --arch llama
(tests/oracle/torch_llama.py: RMSNorm, RoPE, grouped-query attention with
--n-kv-head key/value heads, SwiGLU with hidden size --ffn-hidden, no biases,
tied LM head, glass's fused qkv_proj and gate_up_proj). Both with AdamW,
weight decay on dim>=2 params, on CPU with torch.set_num_threads(--threads);
see setup_threads() for how OpenBLAS/OpenMP threads are set (--raw-threads:
torch.set_num_threads only).

Llama's attention runs a fast path (FastAttention below), the same math as
the oracle's Attention.forward written the way one would for speed: the RoPE
cos/sin table and the causal mask are computed once (the oracle recomputes
them every forward, which is clear but adds ~15 small ops per layer), and
grouped-query attention folds the query heads of a group into the rows of
one matmul per key/value head (q viewed as [B, Hkv, group*T, D] against
k, v [B, Hkv, T, D]) instead of repeat_interleave-copying k and v to H heads
and back-summing their gradients. RMSNorm stays the oracle's (f32 in, f32
out: no casts). --oracle-attention runs the oracle's forward unchanged.

Data: vocabulary = sorted unique characters of the file; step s (counting
from 0, warm-up steps included) uses tokens [s*B*T, (s+1)*B*T + 1) of the
token stream, wrapping at the end; x = first B*T tokens as [B,T], y = the
same shifted by one.
Init (nanoGPT, and glass's Llama::init): normal(0, 0.02) linear/embedding
weights, zero biases, LN/RMSNorm weight 1 / bias 0, the residual projections
(GPT c_proj; Llama o_proj and down_proj) normal(0, 0.02/sqrt(2L)).
Optimizer: AdamW lr --lr, betas (0.9, 0.95), eps 1e-8, weight decay 0.1.

Usage:
    /usr/bin/python3 bench/torch_train_gpt.py --data FILE [--arch gpt2|llama]
        [--n-layer 4] [--n-head 4] [--n-embd 256] [--seq-len 128] [--batch 16]
        [--n-kv-head 0] [--ffn-hidden 0] [--oracle-attention] [--steps 20]
        [--warmup-steps 3] [--lr 1e-3] [--threads 2] [--seed 1337]
        [--log-every 0] [--raw-threads]
Warm-up steps are untimed; the last stdout line is JSON:
    {"system": "pytorch", "arch": ..., "torch_version": ..., "threads": ...,
     "blas_threads": ..., "omp_wait_policy": ...,
     "tokens_per_s": ..., "ms_per_step": ..., "final_loss": ...}
(final_loss: training loss of the last timed step.)
"""

import argparse
import contextlib
import json
import os
import sys
import time

import numpy as np

# torch (and its OpenMP runtime) is imported in main(), after the thread
# settings below are in place.
torch = None


def setup_threads(threads, raw):
    """Import torch and configure threads.

    Debian's torch uses OpenMP for its own kernels and OpenBLAS (pthreads
    build, own thread pool sized to all cores) for matmuls. Left alone, the
    OpenMP workers busy-wait while OpenBLAS runs, and both pools together
    oversubscribe the cores (on a 2-core box --threads 2 was then slower than
    1 thread). Unless raw is set: OMP_WAIT_POLICY defaults to PASSIVE and the
    OpenBLAS pool is sized to `threads` as well, so --threads is the total
    number of cores used. Returns (omp_wait_policy, blas_threads)."""
    global torch
    if not raw:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch as _torch
    torch = _torch
    torch.set_num_threads(threads)
    blas_threads = None
    try:
        import ctypes
        ob = ctypes.CDLL("libopenblas.so.0")
        if not raw:
            ob.openblas_set_num_threads(ctypes.c_int(threads))
        blas_threads = int(ob.openblas_get_num_threads())
    except (OSError, AttributeError):
        pass
    return os.environ.get("OMP_WAIT_POLICY", "default"), blas_threads


def load_tokens(path):
    with open(path, "r", encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    tokens = np.fromiter((stoi[c] for c in text), dtype=np.int64, count=len(text))
    return tokens, chars


def get_batch(tokens, step, B, T):
    n = len(tokens)
    start = (step * B * T) % n
    idx = (start + np.arange(B * T + 1, dtype=np.int64)) % n
    chunk = torch.from_numpy(tokens[idx])
    return chunk[:-1].view(B, T), chunk[1:].view(B, T)


def build_llama(a, vocab_size):
    """tests/oracle/torch_llama.py's Llama, initialised like glass's Llama::init,
    with FastAttention unless --oracle-attention. `a` needs n_layer, n_head,
    n_kv_head, n_embd, ffn_hidden, oracle_attention (tests/oracle/
    selftest_llama.py checks the fast path against an independent forward)."""
    import math

    import torch
    import torch.nn.functional as F
    from torch_llama import Attention, Llama, LlamaConfig, apply_rope, rope_cos_sin

    class FastAttention(Attention):
        """Attention.forward's math with the table and mask made once and GQA
        as one matmul per key/value head (module docstring)."""

        def tables(self, T, dtype):
            """cos, sin [T, D] (the oracle's rope_cos_sin) and the mask [group*T, T] of
            the entries a query must not see, made on the first call for (T, dtype)."""
            key = (T, dtype)
            if key not in self.cache:
                cos, sin = rope_cos_sin(T, self.cfg.head_dim, self.cfg.rope_theta, dtype)
                group = self.cfg.n_head // self.cfg.n_kv_head
                masked = ~torch.ones(T, T, dtype=torch.bool).tril().repeat(group, 1)
                self.cache[key] = (cos, sin, masked)
            return self.cache[key]

        def forward(self, x):
            B, T, _ = x.shape
            H, Hkv, D = self.cfg.n_head, self.cfg.n_kv_head, self.cfg.head_dim
            g = H // Hkv
            cos, sin, masked = self.tables(T, x.dtype)
            q, k, v = self.qkv_proj(x).split([H * D, Hkv * D, Hkv * D], dim=-1)
            # query head h = kv * g + j reads key/value head kv: rows (j, t) of group kv
            q = q.view(B, T, Hkv, g, D).permute(0, 2, 3, 1, 4)  # [B, Hkv, g, T, D]
            k = k.view(B, T, Hkv, D).transpose(1, 2)  # [B, Hkv, T, D]
            v = v.view(B, T, Hkv, D).transpose(1, 2)
            q = apply_rope(q, cos, sin).reshape(B, Hkv, g * T, D)
            k = apply_rope(k, cos, sin)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))  # [B, Hkv, g*T, T]
            att = F.softmax(att.masked_fill(masked, float("-inf")), dim=-1)
            y = (att @ v).view(B, Hkv, g, T, D).permute(0, 3, 1, 2, 4).reshape(B, T, H * D)
            return self.o_proj(y)

    cfg = LlamaConfig(n_layer=a.n_layer, n_head=a.n_head, n_kv_head=a.n_kv_head or a.n_head,
                      n_embd=a.n_embd, vocab_size=vocab_size,
                      ffn_hidden=a.ffn_hidden or llama_ffn_hidden(a.n_embd))
    model = Llama(cfg)
    if not a.oracle_attention:
        for layer in model.model.layers:
            layer.self_attn.__class__ = FastAttention
            layer.self_attn.cache = {}
    proj_std = 0.02 / math.sqrt(2 * cfg.n_layer)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.fill_(1.0)  # RMSNorm weights
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                p.normal_(0.0, proj_std)
            else:
                p.normal_(0.0, 0.02)
    return model


def llama_ffn_hidden(C):
    """glass's GPTConfig::llama_ffn_hidden: floor(8C/3) rounded up to a
    multiple of 256 when that is at least 2048, else of 64."""
    f = 8 * C // 3
    m = 256 if f >= 2048 else 64
    return (f + m - 1) // m * m


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--arch", choices=("gpt2", "llama"), default="gpt2")
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--n-kv-head", type=int, default=0,
                    help="llama: key/value heads (0 = --n-head)")
    ap.add_argument("--ffn-hidden", type=int, default=0,
                    help="llama: SwiGLU hidden size (0 = glass's default for --n-embd)")
    ap.add_argument("--oracle-attention", action="store_true",
                    help="llama: the oracle's Attention.forward instead of the fast path")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup-steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32",
                    help="bf16: forward and loss under torch.autocast('cpu', bfloat16) (f32 "
                         "weights and AdamW, bf16 matmuls), as train_gpt --dtype bf16")
    ap.add_argument("--raw-threads", action="store_true",
                    help="only torch.set_num_threads; leave OpenBLAS threads "
                         "and OMP_WAIT_POLICY at their defaults")
    ap.add_argument("--log-every", type=int, default=0,
                    help="print the loss every N timed steps (0 = never)")
    a = ap.parse_args(argv)

    if a.steps <= 0 or a.warmup_steps < 0 or a.threads <= 0:
        ap.error("--steps and --threads must be > 0, --warmup-steps >= 0")
    if a.n_embd % a.n_head != 0:
        ap.error(f"--n-embd {a.n_embd} not divisible by --n-head {a.n_head}")
    wait_policy, blas_threads = setup_threads(a.threads, a.raw_threads)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "tests", "oracle"))
    from torch_gpt import GPT, GPTConfig, make_adamw
    if a.arch == "gpt2" and (a.n_kv_head or a.ffn_hidden or a.oracle_attention):
        ap.error("--n-kv-head, --ffn-hidden and --oracle-attention are for --arch llama")
    torch.manual_seed(a.seed)

    try:
        tokens, chars = load_tokens(a.data)
    except (OSError, UnicodeDecodeError) as e:
        print(f"torch_train_gpt.py: error: cannot read {a.data}: {e}", file=sys.stderr)
        return 2
    if len(tokens) < 2:
        print("torch_train_gpt.py: error: data file too short", file=sys.stderr)
        return 2
    B, T = a.batch, a.seq_len
    if a.arch == "llama":
        try:
            model = build_llama(a, len(chars))
        except ValueError as e:
            ap.error(str(e))
    else:
        cfg = GPTConfig(n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd,
                        vocab_size=len(chars), block_size=T)
        model = GPT(cfg)
        model.init_weights_nanogpt()
    model.train()
    opt = make_adamw(model, a.lr, 0.1, betas=(0.9, 0.95), eps=1e-8)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"# torch {torch.__version__}, {a.arch}, threads {a.threads}, params {n_params}, "
          f"vocab {len(chars)}, tokens {len(tokens)}, B={B} T={T}", file=sys.stderr)

    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if a.dtype == "bf16"
                 else contextlib.nullcontext())

    def step(s):
        x, y = get_batch(tokens, s, B, T)
        opt.zero_grad(set_to_none=True)
        with autocast:
            _, loss = model(x, y)
        loss.backward()
        opt.step()
        return loss

    s = 0
    for _ in range(a.warmup_steps):
        step(s).item()
        s += 1
    losses = []
    t0 = time.perf_counter()
    for i in range(a.steps):
        loss = step(s)
        s += 1
        losses.append(loss.detach())
        if a.log_every and (i + 1) % a.log_every == 0:
            print(f"# step {s} loss {loss.item():.4f}", file=sys.stderr)
    elapsed = time.perf_counter() - t0
    final_loss = losses[-1].item()

    result = {
        "system": "pytorch",
        "arch": a.arch,
        "torch_version": torch.__version__,
        "threads": a.threads,
        "dtype": a.dtype,
        "blas_threads": blas_threads,
        "omp_wait_policy": wait_policy,
        "tokens_per_s": a.steps * B * T / elapsed,
        "ms_per_step": 1000.0 * elapsed / a.steps,
        "final_loss": final_loss,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
