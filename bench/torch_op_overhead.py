"""PyTorch's side of bench/op_overhead: the same chain of adds, the same three numbers.

A chain of --ops adds of --size-element f32 tensors, x = x + y, on the CPU:
  us_per_op_nograd      under torch.no_grad()
  us_per_op_recording   with x requiring grad (one autograd node per add)
  us_per_node_backward  (x.sum()).backward() over that chain, per node
Best of --repeats each. Prints one JSON line. Run it with OMP_WAIT_POLICY=PASSIVE (op_overhead
does): PyTorch's best setting on this machine (bench/README.md).
"""
import argparse
import json
import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch  # noqa: E402  (after the OpenMP setting)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ops", type=int, default=20000)
    p.add_argument("--size", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    y = torch.ones(a.size)
    nograd = recording = backward = float("inf")
    for _ in range(a.repeats):
        with torch.no_grad():
            x = torch.zeros(a.size)
            t0 = time.perf_counter()
            for _ in range(a.ops):
                x = x + y
            nograd = min(nograd, time.perf_counter() - t0)
        x0 = torch.zeros(a.size, requires_grad=True)
        x = x0
        t0 = time.perf_counter()
        for _ in range(a.ops):
            x = x + y
        recording = min(recording, time.perf_counter() - t0)
        loss = x.sum()
        t0 = time.perf_counter()
        loss.backward()
        backward = min(backward, time.perf_counter() - t0)
        assert float(x.detach().sum()) == a.size * a.ops
    per = 1e6 / a.ops
    print(json.dumps({"system": "pytorch " + torch.__version__,
                      "us_per_op_nograd": nograd * per,
                      "us_per_op_recording": recording * per,
                      "us_per_node_backward": backward * per}))


if __name__ == "__main__":
    main()
