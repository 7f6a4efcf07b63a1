#!/usr/bin/env python3
"""The GPT-2 step tables of docs/profiling.md: `roofline step --json` for each attention kernel,
side by side, as Markdown.

  scripts/roofline_step_table.py [--roofline build/samples/roofline] [--gpu h200]
                                 [--attention flash-simt flash-mma] [-- extra roofline flags]

Each column is one `roofline step --model gpt2 --dtype bf16 --batch 16 --seq-len 1024 --gpu GPU
--attention A --json`; rows are the kernels (by their bound on the GPU, the first column's order),
then the units and the step's totals: ideal_ms, bound_ms, their ratio, tensor_core_flop_share.
Nothing runs on a GPU: the step is planned on the meta device.
"""
import argparse
import json
import subprocess
import sys


def plan(roofline, gpu, attention, extra):
    cmd = [roofline, "step", "--model", "gpt2", "--dtype", "bf16", "--batch", "16",
           "--seq-len", "1024", "--gpu", gpu, "--attention", attention, "--json"] + extra
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stdout}{done.stderr}")
    return json.loads(done.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--roofline", default="build/samples/roofline")
    ap.add_argument("--gpu", default="h200")
    ap.add_argument("--attention", nargs="+", default=["flash-simt", "flash-mma"])
    ap.add_argument("--min-ms", type=float, default=0.01,
                    help="kernels bound under this in every column are summed as one row")
    ap.add_argument("extra", nargs="*", help="more roofline step flags, after --")
    args = ap.parse_args()
    plans = [plan(args.roofline, args.gpu, a, args.extra) for a in args.attention]

    names = [f"`--attention {a}` ({p['attention']})" for a, p in zip(args.attention, plans)]
    print(f"GPT-2 124M, bf16, B=16, T=1024, one training step planned on meta against "
          f"{plans[0]['gpu']} ({plans[0]['peaks']['source']}): bound ms per kernel "
          f"(unit; GFLOP, GB)\n")
    print("| kernel | unit | " + " | ".join(names) + " |")
    print("|---|---|" + "---:|" * len(plans))
    order, seen = [], set()
    for p in plans:  # the first plan's order, then kernels only later plans launch
        for k in p["kernels"]:
            key = (k["kernel"], k["unit"])
            if key not in seen:
                seen.add(key)
                order.append(key)
    def kernel(p, key):
        return next((k for k in p["kernels"] if (k["kernel"], k["unit"]) == key), None)

    small = [key for key in order
             if all((kernel(p, key) or {"bound_ms": 0})["bound_ms"] < args.min_ms for p in plans)]
    for key in order:
        if key in small:
            continue
        cells = []
        for p in plans:
            k = kernel(p, key)
            cells.append("–" if k is None else
                         f"{k['bound_ms']:.3f} ({k['launches']}x; {k['flops'] / 1e9:.0f} GFLOP, "
                         f"{k['bytes'] / 1e9:.2f} GB)")
        print(f"| {key[0]} | {key[1]} | " + " | ".join(cells) + " |")
    if small:
        cells = [f"{sum((kernel(p, key) or {'bound_ms': 0})['bound_ms'] for key in small):.3f}"
                 for p in plans]
        print(f"| {len(small)} more kernels, each under {args.min_ms} ms | | " + " | ".join(cells)
              + " |")
    for unit in ["tensor_core_bf16", "tensor_core_tf32", "cuda_core", "memory"]:
        cells = [f"{next(u for u in p['units'] if u['unit'] == unit)['bound_ms']:.3f}"
                 for p in plans]
        print(f"| **all {unit}** | | " + " | ".join(cells) + " |")
    rows = [("**ideal_ms** (model FLOPs at 100% MFU)", lambda p: f"{p['ideal_ms']:.3f}"),
            ("**bound_ms** (sum of launch bounds)", lambda p: f"{p['bound_ms']:.3f}"),
            ("bound_ms / ideal_ms (goal <= 1.25)", lambda p: f"{p['bound_over_ideal']:.3f}"),
            ("**tensor_core_flop_share** (goal >= 0.97)",
             lambda p: f"{p['tensor_core_flop_share']:.4f}"),
            ("launches", lambda p: f"{p['launch_count']}"),
            ("peak allocated (GiB)",
             lambda p: f"{p['memory']['peak_allocated_bytes'] / 2**30:.2f}")]
    for label, cell in rows:
        print(f"| {label} | | " + " | ".join(cell(p) for p in plans) + " |")


if __name__ == "__main__":
    main()
