#!/usr/bin/python3
"""PyTorch half of the glass training benchmark: character GPT on a text file.

Trains the same model as glass (tests/oracle/torch_gpt.py: nanoGPT-style
pre-LN GPT, tied LM head, GELU tanh, AdamW with weight decay on dim>=2 params)
on CPU with torch.set_num_threads(--threads); see setup_threads() for how
OpenBLAS/OpenMP threads are set (--raw-threads: torch.set_num_threads only).

Data: vocabulary = sorted unique characters of the file; step s (counting
from 0, warm-up steps included) uses tokens [s*B*T, (s+1)*B*T + 1) of the
token stream, wrapping at the end; x = first B*T tokens as [B,T], y = the
same shifted by one.
Init (nanoGPT): normal(0, 0.02) linear/embedding weights, zero biases, LN
weight 1 / bias 0, c_proj weights normal(0, 0.02/sqrt(2L)).
Optimizer: AdamW lr --lr, betas (0.9, 0.95), eps 1e-8, weight decay 0.1.

Usage:
    /usr/bin/python3 bench/torch_train_gpt.py --data FILE [--n-layer 4]
        [--n-head 4] [--n-embd 256] [--seq-len 128] [--batch 16] [--steps 20]
        [--warmup-steps 3] [--lr 1e-3] [--threads 2] [--seed 1337]
        [--log-every 0] [--raw-threads]
Warm-up steps are untimed; the last stdout line is JSON:
    {"system": "pytorch", "torch_version": ..., "threads": ...,
     "blas_threads": ..., "omp_wait_policy": ...,
     "tokens_per_s": ..., "ms_per_step": ..., "final_loss": ...}
(final_loss: training loss of the last timed step.)
"""

import argparse
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup-steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1337)
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
    cfg = GPTConfig(n_layer=a.n_layer, n_head=a.n_head, n_embd=a.n_embd,
                    vocab_size=len(chars), block_size=T)
    model = GPT(cfg)
    model.init_weights_nanogpt()
    model.train()
    opt = make_adamw(model, a.lr, 0.1, betas=(0.9, 0.95), eps=1e-8)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"# torch {torch.__version__}, threads {a.threads}, params {n_params}, "
          f"vocab {len(chars)}, tokens {len(tokens)}, B={B} T={T}", file=sys.stderr)

    def step(s):
        x, y = get_batch(tokens, s, B, T)
        opt.zero_grad(set_to_none=True)
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
        "torch_version": torch.__version__,
        "threads": a.threads,
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
