#!/usr/bin/env python3
"""PyTorch peer of `dlscale commbench --op allreduce`: torch.distributed
all_reduce (SUM, float32) over Gloo on N local processes, timed like
dlscale's: per size, `--warmup` untimed then `--iters` timed calls, the mean
per rank, the slowest rank reported; the input is restored (untimed) before
each call and the result checked. Prints one JSON line.

    /usr/bin/python3 bench/peer_allreduce_torch.py --workers 2 --sizes 1048576,67108864
"""
import argparse
import json
import queue as queue_module
import os
import shutil
import tempfile
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, args, store, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=args.workers)
    rows = []
    for size in args.sizes:
        count = size // 4
        src = torch.remainder(torch.arange(count) + rank, 3).float()
        expected = sum(torch.remainder(torch.arange(count) + r, 3).float()
                       for r in range(args.workers))
        buf = torch.empty_like(src)
        for _ in range(args.warmup):
            buf.copy_(src)
            dist.all_reduce(buf)
        dist.barrier()
        total = 0.0
        for _ in range(args.iters):
            buf.copy_(src)
            start = time.perf_counter()
            dist.all_reduce(buf)
            total += time.perf_counter() - start
        t = torch.tensor([total / args.iters, float((buf != expected).sum())], dtype=torch.float64)
        gathered = [torch.empty_like(t) for _ in range(args.workers)]
        dist.all_gather(gathered, t)
        worst = max(g[0].item() for g in gathered)
        wrong = int(sum(g[1].item() for g in gathered))
        algbw = size / worst / 1e9
        rows.append({"bytes": size, "time_us": worst * 1e6, "algbw_gbps": algbw,
                     "busbw_gbps": algbw * 2 * (args.workers - 1) / args.workers, "wrong": wrong})
    if rank == 0:
        queue.put({"peer": "torch.distributed-gloo", "torch_version": torch.__version__,
                   "workers": args.workers, "rows": rows})
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--sizes", default="1048576,67108864", help="bytes, comma-separated")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    args = p.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    # A file rendezvous: a port picked here and bound later by rank 0 could
    # be taken meanwhile by another process, and the ranks would wait for
    # ever on a stranger's socket.
    store = os.path.join(tempfile.mkdtemp(prefix="dlscale-peer-"), "store")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, args, store, queue)) for r in range(args.workers)]
    for proc in procs:
        proc.start()
    try:
        result = None
        while result is None:
            try:
                result = queue.get(timeout=1)
            except queue_module.Empty:
                # A worker that died never reports: fail now, not after a timeout.
                dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    for proc in procs:
                        proc.terminate()
                    raise SystemExit(f"peer_allreduce_torch: a worker exited with code {dead[0]}")
        for proc in procs:
            proc.join()
    finally:
        shutil.rmtree(os.path.dirname(store), ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
