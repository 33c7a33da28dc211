#!/usr/bin/env python3
"""Runs `dlscale train` and its PyTorch peer alternately on the same machine,
same model, synthetic batch, optimizer, steps and threads, and prints the
median samples/s of each and the ratio dlscale / peer. With --workers 1 the
peer is PyTorch eager (bench/peer_train.py); with --workers N > 1 it is
PyTorch DDP over gloo (bench/peer_ddp.py) against `dlscale train --workers N`
(weak scaling: the batch is per worker). Run order alternates (A B B A ...)
so slow drifts of a shared machine hit both sides alike.

    /usr/bin/python3 bench/run_peer_bench.py --dlscale build/dlscale
    /usr/bin/python3 bench/run_peer_bench.py --case resnet50:16:64 --runs 5
    /usr/bin/python3 bench/run_peer_bench.py --workers 2 --threads 1 \
        --case lenet:64:28 --case resnet18:32:32
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CASES = ["lenet:128:28", "resnet18:64:32"]


def run_dlscale(binary, model, batch, size, args, env):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        cmd = [binary, "train", "--model", model, "--batch", str(batch), "--image-size", str(size),
               "--steps", str(args.steps), "--warmup", str(args.warmup), "--threads",
               str(args.threads), "--optimizer", args.optimizer, "--display-every", "0",
               "--memory-format", args.memory_format, "--workers", str(args.workers),
               "--json", path]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        with open(path) as f:
            return json.load(f)["results"]["samples_per_sec"]
    finally:
        if os.path.exists(path):
            os.remove(path)


def run_peer(model, batch, size, args, env):
    script = "peer_train.py" if args.workers == 1 else "peer_ddp.py"
    cmd = ["/usr/bin/python3", os.path.join(HERE, script), "--model", model, "--batch",
           str(batch), "--image-size", str(size), "--steps", str(args.steps), "--warmup",
           str(args.warmup), "--threads", str(args.threads), "--optimizer", args.optimizer]
    if args.workers > 1:
        cmd += ["--workers", str(args.workers)]
    if args.peer_channels_last:
        cmd.append("--channels-last")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])["samples_per_sec"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dlscale", default="build/dlscale", help="path to the dlscale binary")
    ap.add_argument("--case", action="append", default=None,
                    help="model:batch:image_size (repeatable); default: %s" % " ".join(DEFAULT_CASES))
    ap.add_argument("--runs", type=int, default=3, help="runs of each side per case (>= 3)")
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads per worker")
    ap.add_argument("--workers", type=int, default=1,
                    help="workers per side; > 1 compares with PyTorch DDP (gloo)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--optimizer", default="sgd")
    ap.add_argument("--memory-format", default="channels-last",
                    help="dlscale's --memory-format (its default: channels-last)")
    ap.add_argument("--peer-channels-last", action="store_true",
                    help="make the peer use channels-last too (like-for-like layouts)")
    ap.add_argument("--peer-malloc-tuning", action="store_true",
                    help="give the peer the malloc settings dlscale applies to itself "
                         "(GLIBC_TUNABLES: no mmap per allocation, no trimming)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    if args.runs < 3:
        sys.exit("--runs must be >= 3: medians of fewer runs are not worth quoting")
    # Same thread settings for both sides, including BLAS's own pool.
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads))
    peer_env = dict(env)
    if args.peer_malloc_tuning:
        peer_env["GLIBC_TUNABLES"] = ("glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=1073741824:"
                                      "glibc.malloc.top_pad=67108864")
    results = []
    for case in args.case or DEFAULT_CASES:
        model, batch, size = case.split(":")
        batch, size = int(batch), int(size)
        ours, peer = [], []
        for i in range(args.runs):
            order = [0, 1] if i % 2 == 0 else [1, 0]
            for side in order:
                if side == 0:
                    ours.append(run_dlscale(args.dlscale, model, batch, size, args, env))
                else:
                    peer.append(run_peer(model, batch, size, args, peer_env))
            print(f"  {model} b{batch} {size}px run {i + 1}/{args.runs}: dlscale {ours[-1]:.1f}"
                  f"  peer {peer[-1]:.1f} samples/s", file=sys.stderr, flush=True)
        m_ours, m_peer = statistics.median(ours), statistics.median(peer)
        results.append({"model": model, "batch": batch, "image_size": size, "threads": args.threads,
                        "workers": args.workers,
                        "dlscale_runs": ours, "peer_runs": peer, "dlscale_median": m_ours,
                        "peer_median": m_peer, "ratio": m_ours / m_peer})
    print(f"{'model':<10} {'batch':>5} {'size':>5} {'workers':>7} {'threads':>7} "
          f"{'dlscale samples/s':>18} {'peer samples/s':>15} {'ratio':>6}")
    for r in results:
        print(f"{r['model']:<10} {r['batch']:>5} {r['image_size']:>5} {r['workers']:>7} "
              f"{r['threads']:>7} {r['dlscale_median']:>18.1f} {r['peer_median']:>15.1f} "
              f"{r['ratio']:>6.3f}")
    peer = "PyTorch eager" if args.workers == 1 else "PyTorch DDP (gloo)"
    print(f"medians of {args.runs} alternated runs each; peer = {peer} "
          f"(python3-torch), same LibTorch build; dlscale {args.memory_format}, peer "
          f"{'channels-last' if args.peer_channels_last else 'contiguous'}"
          f"{', peer malloc tuned like dlscale' if args.peer_malloc_tuning else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
