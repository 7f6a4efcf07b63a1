"""PyTorch's side of bench/op_overhead: the same chain of adds, the same three numbers.

A chain of --ops adds of --size-element f32 tensors, x = x + y, on the CPU:
  us_per_op_nograd      under torch.no_grad()
  us_per_op_recording   with x requiring grad (one autograd node per add)
  us_per_node_backward  (x.sum()).backward() over that chain, per node
Best of --repeats each, in wall-clock time and (cpu_us_*) in the thread's CPU time
(time.thread_time: waiting for a core on a shared machine left out), and
  rss_bytes_per_op_recording  the growth of resident memory during the recording chain, per op
(the most over the repeats). Prints one JSON line. Run it with OMP_WAIT_POLICY=PASSIVE (op_overhead
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
    best = {"nograd": [float("inf")] * 2, "recording": [float("inf")] * 2,
            "backward": [float("inf")] * 2}

    page = os.sysconf("SC_PAGESIZE")

    def resident():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * page

    rss_growth = 0

    def start():
        return time.perf_counter(), time.thread_time()

    def stop(name, t0):
        wall, cpu = time.perf_counter() - t0[0], time.thread_time() - t0[1]
        best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]

    for _ in range(a.repeats):
        with torch.no_grad():
            x = torch.zeros(a.size)
            t0 = start()
            for _ in range(a.ops):
                x = x + y
            stop("nograd", t0)
        x0 = torch.zeros(a.size, requires_grad=True)
        x = x0
        rss0 = resident()
        t0 = start()
        for _ in range(a.ops):
            x = x + y
        stop("recording", t0)
        rss_growth = max(rss_growth, resident() - rss0)
        loss = x.sum()
        t0 = start()
        loss.backward()
        stop("backward", t0)
        assert float(x.detach().sum()) == a.size * a.ops
    per = 1e6 / a.ops
    print(json.dumps({"system": "pytorch " + torch.__version__,
                      "us_per_op_nograd": best["nograd"][0] * per,
                      "us_per_op_recording": best["recording"][0] * per,
                      "us_per_node_backward": best["backward"][0] * per,
                      "cpu_us_per_op_nograd": best["nograd"][1] * per,
                      "cpu_us_per_op_recording": best["recording"][1] * per,
                      "cpu_us_per_node_backward": best["backward"][1] * per,
                      "rss_bytes_per_op_recording": rss_growth / a.ops}))


if __name__ == "__main__":
    main()
