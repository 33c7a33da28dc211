#!/usr/bin/env python3
"""dlscale's own 1 -> N worker scaling on this machine: for each model, runs
`dlscale train` with 1 and N local workers in weak scaling (per-worker batch
fixed) and strong scaling (global batch fixed), several times each,
alternating, and prints median step times, throughput, speedup and
efficiency (docs/metrics.md):
    weak:   efficiency = t1 / tN          strong: efficiency = t1 / (N * tN)

    /usr/bin/python3 bench/scaling.py --dlscale build/dlscale --workers 2 --threads 1
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

DEFAULT_CASES = ["lenet:64:28", "resnet18:32:32"]


def run(binary, model, size, workers, batch_args, args):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        cmd = [binary, "train", "--model", model, "--image-size", str(size), "--workers",
               str(workers), "--threads", str(args.threads), "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--display-every", "0", "--json", path] + batch_args
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            r = json.load(f)["results"]
        return r["step_time_p50_ms"], r["samples_per_sec"]
    finally:
        if os.path.exists(path):
            os.remove(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dlscale", default="build/dlscale")
    ap.add_argument("--case", action="append", default=None,
                    help="model:per_worker_batch:image_size; default: %s" % " ".join(DEFAULT_CASES))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="threads per worker")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    n = args.workers
    rows = []
    for case in args.case or DEFAULT_CASES:
        model, batch, size = case.split(":")
        batch, size = int(batch), int(size)
        plans = {  # name -> (workers, batch flags)
            "1": (1, ["--batch", str(batch)]),
            "weak": (n, ["--batch", str(batch)]),
            "strong1": (1, ["--global-batch", str(batch * n)]),
            "strong": (n, ["--global-batch", str(batch * n)]),
        }
        samples = {k: [] for k in plans}
        for i in range(args.runs):
            order = list(plans) if i % 2 == 0 else list(reversed(list(plans)))
            for k in order:
                samples[k].append(run(args.dlscale, model, size, plans[k][0], plans[k][1], args))
            print(f"  {model}: run {i + 1}/{args.runs} done", file=sys.stderr, flush=True)
        med = {k: (statistics.median(t for t, _ in v), statistics.median(s for _, s in v))
               for k, v in samples.items()}
        rows.append((model, batch, size, "weak", med["1"], med["weak"],
                     med["1"][0] / med["weak"][0]))
        rows.append((model, batch * n, size, "strong", med["strong1"], med["strong"],
                     med["strong1"][0] / (n * med["strong"][0])))
    print(f"{'model':<10} {'batch':>6} {'mode':<6} {'t1 ms':>8} {'tN ms':>8} {'1w samples/s':>13} "
          f"{'Nw samples/s':>13} {'speedup':>8} {'efficiency':>10}")
    for model, batch, size, mode, one, many, eff in rows:
        print(f"{model:<10} {batch:>6} {mode:<6} {one[0]:>8.2f} {many[0]:>8.2f} {one[1]:>13.1f} "
              f"{many[1]:>13.1f} {many[1] / one[1]:>8.3f} {100 * eff:>9.1f}%")
    print(f"N = {n} workers x {args.threads} thread(s); batch = per worker (weak) or global "
          f"(strong); medians of {args.runs} runs; step times are p50 of the max over ranks")


if __name__ == "__main__":
    main()
