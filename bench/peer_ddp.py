#!/usr/bin/env python3
"""PyTorch DDP (gloo, CPU) peer of `dlscale train --workers N`: N local worker
processes, each training the same model (the zoo's image models, transformer,
gnmt, ncf) on its own synthetic batch (random tensors made once) with DistributedDataParallel's bucketed allreduce (25 MB
buckets, 1 MB first bucket), the same optimizer, steps and threads per worker.
With --zero the optimizer is PyTorch's ZeroRedundancyOptimizer over DDP (each
rank keeps the optimizer state of its partition of the parameters, then
broadcasts them), the peer of `dlscale train --strategy zero --zero-stage 1`;
it also reports the most optimizer-state bytes any rank keeps.
Throughput is measured like dlscale's: measured steps x global batch / wall
time of the measured steps on rank 0, after a barrier at start.

Prints one JSON line. Run with Debian's interpreter:
    /usr/bin/python3 bench/peer_ddp.py --model lenet --batch 64 --workers 2 --threads 1
"""
import argparse
import json
import os
import shutil
import tempfile
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

from peer_models import build_model  # noqa: E402
from peer_train import (DEFAULT_CLASSES, DEFAULT_SIZE, count_positive_rois, make_optimizer,  # noqa: E402
                        synthetic_batch, timed_steps)


def state_bytes(optimizer):
    """Bytes of the optimizer's state tensors on this rank (Adam's step
    counters are scalars: not counted, as dlscale does not count them)."""
    return sum(t.numel() * t.element_size() for st in optimizer.state.values()
               for t in st.values() if torch.is_tensor(t) and t.dim() > 0)


def worker(rank, args, store, queue):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=args.workers)
    torch.manual_seed(args.seed)
    size = args.image_size or DEFAULT_SIZE.get(args.model, 224)
    classes = args.classes or DEFAULT_CLASSES.get(args.model, 1000)
    model = build_model(args.model, size, num_classes=classes, vocab=args.vocab, hidden=args.hidden,
                        sparse=args.sparse_embeddings, rois=args.rois)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
    if args.zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        kinds = {"sgd": (torch.optim.SGD, {}), "momentum": (torch.optim.SGD, {"momentum": args.momentum}),
                 "adam": (torch.optim.Adam, {})}
        cls, extra = kinds[args.optimizer]
        opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=cls, lr=args.lr, **extra)
    else:
        opt = make_optimizer(args.optimizer, ddp.parameters(), args.lr, args.momentum)
    torch.manual_seed(args.seed + rank)  # each rank its own batch, made once
    inputs, loss_fn, items = synthetic_batch(args, "cpu", first=rank * args.batch)  # maskrcnn: dlscale's rank's images
    positives = count_positive_rois(model) if args.model == "maskrcnn" else []
    dist.barrier()
    times, wall = timed_steps(ddp, opt, inputs, loss_fn, args.steps, args.warmup)
    positives = positives[args.warmup * args.batch:]  # rank 0's measured steps
    # The most optimizer state any rank keeps (ZeroRedundancyOptimizer places
    # whole tensors, so the ranks' shares differ).
    most = torch.tensor([state_bytes(opt.optim if args.zero else opt)], dtype=torch.int64)
    dist.all_reduce(most, op=dist.ReduceOp.MAX)
    if rank == 0:
        measured = times[args.warmup:]
        queue.put({"peer": "pytorch-ddp-gloo", "torch_version": torch.__version__,
                   "workers": args.workers, "threads": torch.get_num_threads(),
                   "model": args.model, "batch_per_worker": args.batch,
                   "measured_steps": len(measured),
                   "samples_per_sec": len(measured) * args.batch * args.workers / wall,
                   "items_per_sec": len(measured) * args.batch * args.workers * items / wall,
                   "step_time_p50_ms": statistics.median(measured) * 1e3,
                   "positive_rois_per_image": statistics.mean(positives) if positives else None,
                   "zero": args.zero,
                   "optimizer_state_bytes_max": int(most.item())})
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description="PyTorch DDP (gloo) peer of dlscale train --workers N")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=32, help="samples per step per worker")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20, help="total steps including warm-up")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads per worker")
    ap.add_argument("--image-size", type=int, default=0)
    ap.add_argument("--classes", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=0, help="transformer, gnmt: 0 = 32768, 32320")
    ap.add_argument("--seq-len", type=int, default=0, help="transformer, gnmt: 0 = 128, 50")
    ap.add_argument("--hidden", type=int, default=0, help="gnmt: 0 = 1024")
    ap.add_argument("--rois", type=int, default=512, help="maskrcnn: RoIs sampled per image")
    ap.add_argument("--optimizer", default="sgd")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--bucket-mb", type=float, default=25.0)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--sparse-embeddings", action="store_true",
                    help="ncf: sparse embedding gradients (DDP allreduces them as sparse tensors over gloo)")
    ap.add_argument("--zero", action="store_true",
                    help="ZeroRedundancyOptimizer (optimizer state sharded over the ranks)")
    args = ap.parse_args()
    # A file rendezvous: a port picked here and bound later by rank 0 could
    # be taken meanwhile by another process, and the ranks would wait for
    # ever on a stranger's socket.
    store = os.path.join(tempfile.mkdtemp(prefix="dlscale-peer-"), "store")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    try:
        mp.start_processes(worker, args=(args, store, queue), nprocs=args.workers, join=True,
                           start_method="spawn")
    finally:
        shutil.rmtree(os.path.dirname(store), ignore_errors=True)
    print(json.dumps(queue.get()))


if __name__ == "__main__":
    main()
