#!/usr/bin/env python3
"""dlscale's allreduce against its peers on the same machine, in the same run:
`dlscale commbench --op allreduce` with the Gloo backend (local workers) and
with the MPI backend (under mpirun), torch.distributed.all_reduce over Gloo
(bench/peer_allreduce_torch.py) and a plain MPI_Allreduce loop, out of place
and in place (bench/peer_allreduce_mpi.c, built here with mpicc), N local
processes each,
float32, the same sizes, warm-up and iterations, every result checked. The
five tools alternate within each repeat so the machine's drift hits all
alike. Prints the median busbw per tool and size, each backend's ratio to
the best peer on the same engine, and dlscale's best against the best peer.

    /usr/bin/python3 bench/commbench_peers.py --dlscale build/dlscale --repeats 5
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np"]


def run_dlscale(args, sizes, backend):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        rows = []
        for size in sizes:  # one size per call: --min-bytes = --max-bytes
            launch = ([args.dlscale, "commbench", "--workers", str(args.workers)]
                      if backend == "gloo" else MPIRUN + [str(args.workers), args.dlscale, "commbench"])
            subprocess.run(launch + ["--op", "allreduce", "--min-bytes", str(size), "--max-bytes",
                                     str(size), "--warmup", str(args.warmup), "--iters",
                                     str(args.iters), "--threads", "1", "--json", f.name],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            with open(f.name) as r:
                rows += json.load(r)["results"]["rows"]
        return rows


def run_torch(args, sizes):
    out = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "peer_allreduce_torch.py"),
                          "--workers", str(args.workers), "--sizes", ",".join(map(str, sizes)),
                          "--warmup", str(args.warmup), "--iters", str(args.iters)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["rows"]


def run_mpi(args, sizes, binary, inplace):
    env = dict(os.environ, PEER_INPLACE="1" if inplace else "0")
    out = subprocess.run(MPIRUN[:-1] + ["-x", "PEER_INPLACE", "-np", str(args.workers), binary,
                                        str(args.warmup), str(args.iters)]
                         + [str(s) for s in sizes],
                         check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])["rows"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dlscale", default="build/dlscale")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--sizes", default="1048576,67108864", help="bytes, comma-separated")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    build = os.path.join(os.path.dirname(os.path.abspath(args.dlscale)), "peer_allreduce_mpi")
    subprocess.run(["mpicc", "-O2", "-o", build, os.path.join(HERE, "peer_allreduce_mpi.c")],
                   check=True)
    tools = {"dlscale-gloo": lambda: run_dlscale(args, sizes, "gloo"),
             "torch-gloo": lambda: run_torch(args, sizes),
             "dlscale-mpi": lambda: run_dlscale(args, sizes, "mpi"),
             "mpi": lambda: run_mpi(args, sizes, build, False),
             "mpi-inplace": lambda: run_mpi(args, sizes, build, True)}
    busbw = {(t, s): [] for t in tools for s in sizes}
    for rep in range(args.repeats):
        for name, run in tools.items():
            for row in run():
                if row["wrong"] != 0:
                    sys.exit(f"{name}: {row['wrong']} wrong elements at {row['bytes']} bytes")
                busbw[(name, row["bytes"])].append(row["busbw_gbps"])
        print(f"repeat {rep + 1}/{args.repeats} done", file=sys.stderr)
    print(f"allreduce busbw (GB/s), float32, {args.workers} local processes, median of "
          f"{args.repeats} alternating repeats, {args.iters} timed iterations each")
    print(f"{'bytes':>10} {'dlscale-gloo':>13} {'torch-gloo':>11} {'dlscale-mpi':>12} {'mpi':>8} "
          f"{'mpi-inplace':>12} {'gloo ratio':>11} {'mpi ratio':>10} {'best/best':>10}")
    for s in sizes:
        med = {t: statistics.median(busbw[(t, s)]) for t in tools}
        best_mpi = max(med["mpi"], med["mpi-inplace"])
        ours = max(med["dlscale-gloo"], med["dlscale-mpi"])
        peers = max(med["torch-gloo"], best_mpi)
        print(f"{s:>10} {med['dlscale-gloo']:>13.3f} {med['torch-gloo']:>11.3f} "
              f"{med['dlscale-mpi']:>12.3f} {med['mpi']:>8.3f} {med['mpi-inplace']:>12.3f} "
              f"{med['dlscale-gloo'] / med['torch-gloo']:>11.2f} "
              f"{med['dlscale-mpi'] / best_mpi:>10.2f} {ours / peers:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
