#!/usr/bin/env python3
"""PyTorch eager peer of `dlscale train`: trains the same model on the same kind
of synthetic batch (random tensors made once and reused) with the same
optimizer, steps and threads, and measures throughput the same way (wall time
of the measured steps; loss read back every step).

Prints one JSON line: {"samples_per_sec": ..., "step_time_p50_ms": ..., ...}.
Run with Debian's interpreter: /usr/bin/python3 bench/peer_train.py --help
"""
import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from peer_models import build_model, maskrcnn_width  # noqa: E402

CHANNELS = {"lenet": 1}
DEFAULT_SIZE = {"lenet": 28, "inception3": 299, "maskrcnn": 800}
DEFAULT_CLASSES = {"lenet": 10, "ssd300": 81, "maskrcnn": 81}


def make_optimizer(name, params, lr, momentum):
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    if name == "momentum":
        return torch.optim.SGD(params, lr=lr, momentum=momentum)
    if name == "nesterov":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, nesterov=True)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr)
    raise SystemExit(f"unknown optimizer {name}")


AMP_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def multibox_loss(out, offsets, labels):
    """SSD's loss as dlscale computes it (src/libtorch/models/detection_task.cpp): per
    image, smooth L1 on the matched boxes' offsets plus cross-entropy on the
    matched boxes and the 3 hardest background boxes per matched one, over its
    matched boxes; averaged over the batch."""
    f = torch.nn.functional
    loc, conf = out[:, :4], out[:, 4:]
    pos = labels > 0
    matched = pos.sum(1)
    box = (f.smooth_l1_loss(loc, offsets.transpose(1, 2), reduction="none").sum(1) * pos).sum(1)
    ce = f.cross_entropy(conf, labels, reduction="none")
    with torch.no_grad():
        rank = ce.masked_fill(pos, 0).argsort(1, descending=True).argsort(1)
    neg = rank < (3 * matched).clamp(max=labels.shape[1]).unsqueeze(1)
    total = box + (ce * (pos.float() + neg.float())).sum(1)
    return (total * (matched > 0) / matched.float().clamp(min=1e-6)).mean()


def mix_seed(seed, value):
    """dlscale's data::mix_seed: two rounds of splitmix64."""
    mask = (1 << 64) - 1

    def splitmix64(state):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        return state, z ^ (z >> 31)

    state, a = splitmix64(seed & mask)
    _, b = splitmix64(a ^ value)
    return b


def maskrcnn_sample(index, seed, colours, h, w):
    """dlscale's synthetic maskrcnn sample `index` of data seed `seed`, with
    its classes' `colours` (libtorch/models/maskrcnn_task.cpp), drawn from the same
    generators: 1 to 3 objects, each an ellipse filling a box of sides 0.15
    to 0.6 of the image's, painted in its class's colour over unit Gaussian
    noise, later objects over earlier ones; the same pixels, boxes, classes
    and masks."""
    sample_seed = mix_seed(seed, index)
    gen = torch.Generator().manual_seed(sample_seed)
    image = torch.randn(3, h, w, generator=gen)
    n = 1 + sample_seed % 3
    u = torch.rand(n, 4, generator=gen)
    labels = torch.randint(1, colours.shape[0], (n,), generator=gen)
    boxes, masks = torch.zeros(n, 4), torch.zeros(n, h, w, dtype=torch.uint8)

    def span(side_u, start_u, extent):
        length = max(2, math.floor((0.15 + 0.45 * side_u) * extent + 0.5))
        start = math.floor(start_u * (extent - length) + 0.5)
        return start, start + length

    for k in range(n):
        r = [float(v) for v in u[k]]
        x0, x1 = span(r[0], r[2], w)
        y0, y1 = span(r[1], r[3], h)
        cx, cy, a, b = 0.5 * (x0 + x1), 0.5 * (y0 + y1), 0.5 * (x1 - x0), 0.5 * (y1 - y0)
        dx = ((torch.arange(w, dtype=torch.float32) + 0.5 - cx) / a).square()
        dy = ((torch.arange(h, dtype=torch.float32) + 0.5 - cy) / b).square()
        inside = (dy.unsqueeze(1) + dx.unsqueeze(0)) <= 1.0
        masks[:k].masked_fill_(inside, 0)
        masks[k].masked_fill_(inside, 1)
        image = torch.where(inside.unsqueeze(0), colours[labels[k]].view(3, 1, 1), image)
        boxes[k] = torch.tensor([x0, y0, x1, y1], dtype=torch.float32)
    return image, {"boxes": boxes, "labels": labels, "masks": masks}


def maskrcnn_batch(args, device, first=0):
    """dlscale's own images (maskrcnn_sample) `first` .. `first + batch - 1`,
    those dlscale's rank first / batch trains on with the same --seed (its
    data seed is --seed + 1, its synthetic pool one global batch); the loss
    is the sum of torchvision's five."""
    h = args.image_size or 800
    classes = args.classes or 81
    seed = args.seed + 1
    # dlscale's class_colours: drawn once per stream, from the data seed
    colours = torch.randn(classes, 3, generator=torch.Generator().manual_seed(seed))
    images, targets = [], []
    for index in range(first, first + args.batch):
        image, target = maskrcnn_sample(index, seed, colours, h, maskrcnn_width(h))
        images.append(image.to(device))
        targets.append({k: v.to(device) for k, v in target.items()})
    return (images, targets), lambda out: sum(out.values()), 1


def count_positive_rois(model):
    """Wraps the RoI heads' sampling to count the positive RoIs (those the
    mask head runs on); returns the list it appends each image's count to."""
    counts, sample = [], model.roi_heads.select_training_samples

    def counted(proposals, targets):
        out = sample(proposals, targets)
        counts.extend(int((labels > 0).sum()) for labels in out[2])
        return out

    model.roi_heads.select_training_samples = counted
    return counts


def synthetic_batch(args, device, first=0):
    """The model's inputs (a tuple) and its loss function of the output, for
    one synthetic batch made once, as dlscale's synthetic data (maskrcnn:
    dlscale's samples from `first` on)."""
    b = args.batch
    if args.model.startswith("transformer") or args.model == "gnmt":
        gnmt = args.model == "gnmt"
        vocab = args.vocab or (32320 if gnmt else 32768)
        seq = args.seq_len or (50 if gnmt else 128)
        src = torch.randint(2, vocab, (b, seq), device=device)
        tgt = torch.randint(2, vocab, (b, seq), device=device)
        tgt_in = torch.cat([torch.ones(b, 1, dtype=torch.long, device=device), tgt[:, :-1]], 1)
        ce = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
        return (src, tgt_in), lambda out: ce(out.reshape(-1, vocab), tgt.reshape(-1)), seq
    if args.model == "ssd300":
        classes = args.classes or 81
        images = torch.randn(b, 3, 300, 300, device=device)
        if args.channels_last:
            images = images.contiguous(memory_format=torch.channels_last)
        # About as many matched boxes as dlscale's synthetic objects match (1-3 objects).
        labels = torch.where(torch.rand(b, 8732, device=device) < 0.005,
                             torch.randint(1, classes, (b, 8732), device=device), 0)
        offsets = torch.randn(b, 8732, 4, device=device) * 0.5 * (labels > 0).unsqueeze(2)
        return (images,), lambda out: multibox_loss(out, offsets, labels), 1
    if args.model == "maskrcnn":
        return maskrcnn_batch(args, device, first)
    if args.model == "ncf":
        user = torch.randint(138493, (b,), device=device)
        item = torch.randint(26744, (b,), device=device)
        clicked = torch.randint(2, (b,), device=device).float()
        bce = torch.nn.BCEWithLogitsLoss()
        return (user, item), lambda out: bce(out, clicked), 1
    size = args.image_size or DEFAULT_SIZE.get(args.model, 224)
    channels = CHANNELS.get(args.model, 3)
    classes = args.classes or (10 if args.model == "lenet" else 1000)
    inputs = torch.randn(b, channels, size, size, device=device)
    if args.channels_last:
        inputs = inputs.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(classes, (b,), device=device)
    ce = torch.nn.CrossEntropyLoss()
    return (inputs,), lambda out: ce(out, labels), 1


def timed_steps(model, opt, inputs, loss_fn, steps, warmup, amp="none"):
    """Trains `steps` steps like dlscale (gradients set to None, loss read
    back every step; with --amp, autocast of the forward pass and for fp16 a
    GradScaler). Returns (per-step seconds, wall seconds of the steps after
    `warmup`)."""
    first = inputs[0][0] if isinstance(inputs[0], list) else inputs[0]  # maskrcnn: a list of images
    device_type = first.device.type
    scaler = torch.amp.GradScaler(device_type) if amp == "fp16" else None
    times = []
    start = None
    for step in range(steps):
        if step == warmup:
            start = time.perf_counter()
        t0 = time.perf_counter()
        # PyTorch 1.13's CPU autocast refuses float32 even when disabled: no
        # autocast context at all without --amp.
        scope = (torch.autocast(device_type, dtype=AMP_DTYPES[amp]) if amp != "none"
                 else contextlib.nullcontext())
        with scope:
            loss = loss_fn(model(*inputs))
        opt.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        loss.item()
        times.append(time.perf_counter() - t0)
    return times, time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description="PyTorch eager peer of dlscale train")
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20, help="total steps including warm-up")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--image-size", type=int, default=0)
    ap.add_argument("--classes", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=0, help="transformer, gnmt: 0 = 32768, 32320")
    ap.add_argument("--seq-len", type=int, default=0, help="transformer, gnmt: 0 = 128, 50")
    ap.add_argument("--hidden", type=int, default=0, help="gnmt: 0 = 1024")
    ap.add_argument("--dropout", type=float, default=-1, help="transformer, gnmt: < 0 = the model's own")
    ap.add_argument("--rois", type=int, default=512, help="maskrcnn: RoIs sampled per image")
    ap.add_argument("--optimizer", default="sgd")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--channels-last", action="store_true",
                    help="NHWC model and inputs (PyTorch's default is contiguous NCHW)")
    ap.add_argument("--device", default="cpu", help="cpu | cuda (sets cudnn.benchmark, as dlscale does)")
    ap.add_argument("--amp", default="none", choices=["none", "bf16", "fp16"],
                    help="autocast dtype of the forward pass (fp16 adds a GradScaler)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.backends.cudnn.benchmark = args.device.startswith("cuda")
    torch.manual_seed(args.seed)
    size = args.image_size or DEFAULT_SIZE.get(args.model, 224)
    classes = args.classes or DEFAULT_CLASSES.get(args.model, 1000)
    model = build_model(args.model, size, num_classes=classes, vocab=args.vocab, hidden=args.hidden,
                        rois=args.rois).to(args.device)
    if args.dropout >= 0:
        for m in model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = args.dropout
            if isinstance(m, torch.nn.MultiheadAttention):
                m.dropout = args.dropout
    model.train()
    opt = make_optimizer(args.optimizer, model.parameters(), args.lr, args.momentum)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    inputs, loss_fn, items_per_sample = synthetic_batch(args, args.device)
    positives = count_positive_rois(model) if args.model == "maskrcnn" else []
    times, wall = timed_steps(model, opt, inputs, loss_fn, args.steps, args.warmup, args.amp)
    measured = times[args.warmup:]
    # maskrcnn: each measured step's positive RoIs per image (what its mask head ran on)
    positives = positives[args.warmup * args.batch:]
    print(json.dumps({
        "peer": "pytorch-eager",
        "torch_version": torch.__version__,
        "threads": torch.get_num_threads(),
        "channels_last": args.channels_last,
        "device": args.device,
        "gpu": torch.cuda.get_device_name() if args.device.startswith("cuda") else "",
        "amp": args.amp,
        "model": args.model,
        "batch": args.batch,
        "measured_steps": len(measured),
        "samples_per_sec": len(measured) * args.batch / wall,
        "items_per_sec": len(measured) * args.batch * items_per_sample / wall,
        "step_time_p50_ms": statistics.median(measured) * 1e3,
        "positive_rois_per_image": statistics.mean(positives) if positives else None,
    }))


if __name__ == "__main__":
    main()
