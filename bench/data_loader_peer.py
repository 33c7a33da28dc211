#!/usr/bin/env python3
"""PyTorch peer of `dlscale data bench`: a torch.utils.data.DataLoader over
torchvision's datasets doing the same work as dlscale's input pipeline (read,
decode, augment, normalise, batch into a float32 NCHW tensor), timed the same
way: W warm-up batches, then N batches on the clock; samples/s = N x B / wall.

    /usr/bin/python3 bench/data_loader_peer.py --data fashion-mnist --batch 256 --workers 1
    /usr/bin/python3 bench/data_loader_peer.py --data folder:/tmp/dlscale-jpeg-folder \
        --image-size 112 --batch 64 --workers 2 --steps 200 --json peer.json

The transforms match dlscale's defaults (`--augment auto`):
  fashion-mnist  torchvision.datasets.FashionMNIST, RandomCrop(S, padding=S//8)
                 + RandomHorizontalFlip + ToTensor + Normalize(0.2860, 0.3530)
                 (dlscale's crop-flip pads by size/8 with zeros and normalises by
                 the training set's pixel mean/std, which are these numbers)
  folder:DIR     torchvision.datasets.ImageFolder (PIL decode, RGB),
                 RandomResizedCrop(S) (scale 0.08-1, ratio 3/4-4/3, bilinear)
                 + RandomHorizontalFlip + ToTensor + Normalize(ImageNet)
DataLoader(batch_size=B, shuffle=True, num_workers=T, drop_last=True,
persistent_workers=T>0, prefetch_factor=2). With T workers the DataLoader
also has its main process (which receives the batches); dlscale's
--data-threads T likewise has its main and prefetch threads besides the T.
The loader is re-iterated over epochs until N batches are timed.
torchvision wants the IDX files uncompressed under ROOT/FashionMNIST/raw/:
they are gunzipped from Debian's /usr/share/datasets/fashion-mnist once into
--cache-root.
"""
import argparse
import gzip
import json
import os
import shutil
import sys
import time

import torch
import torchvision
from torchvision import transforms

FASHION_MNIST_GZ = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                       "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


def fashion_mnist_root(cache_root):
    """A root torchvision's FashionMNIST reads: ROOT/FashionMNIST/raw/<4 ubyte files>."""
    raw = os.path.join(cache_root, "FashionMNIST", "raw")
    os.makedirs(raw, exist_ok=True)
    for name in FASHION_MNIST_FILES:
        dst = os.path.join(raw, name)
        if os.path.exists(dst):
            continue
        tmp = dst + ".tmp%d" % os.getpid()
        with gzip.open(os.path.join(FASHION_MNIST_GZ, name + ".gz"), "rb") as src, \
                open(tmp, "wb") as out:
            shutil.copyfileobj(src, out)
        os.replace(tmp, dst)
    return cache_root


def make_dataset(args):
    if args.data == "fashion-mnist":
        size = args.image_size or 28
        if size != 28:
            sys.exit("fashion-mnist: --image-size must be 28 (0 = 28); dlscale would resize first")
        t = transforms.Compose([
            transforms.RandomCrop(size, padding=max(1, size // 8)),  # zero fill, as dlscale
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize([0.2860], [0.3530]),
        ])
        return torchvision.datasets.FashionMNIST(fashion_mnist_root(args.cache_root), train=True,
                                                 transform=t, download=False)
    if args.data.startswith("folder:"):
        size = args.image_size or 224
        t = transforms.Compose([
            transforms.RandomResizedCrop(size),  # scale (0.08, 1), ratio (3/4, 4/3), bilinear
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD),
        ])
        return torchvision.datasets.ImageFolder(args.data[len("folder:"):], transform=t)
    sys.exit("--data must be fashion-mnist or folder:DIR (got %r)" % args.data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="fashion-mnist", help="fashion-mnist | folder:DIR")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--workers", type=int, default=1,
                    help="DataLoader num_workers (dlscale's --data-threads)")
    ap.add_argument("--steps", type=int, default=50, help="batches timed")
    ap.add_argument("--warmup", type=int, default=5, help="batches read before the clock starts")
    ap.add_argument("--image-size", type=int, default=0, help="0 = 28 for fashion-mnist, 224 else")
    ap.add_argument("--prefetch-factor", type=int, default=2)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--cache-root", default="/tmp/dlscale-peer-fashion-mnist",
                    help="where the uncompressed IDX files for torchvision go")
    ap.add_argument("--json", help="write {\"samples_per_sec\": X, ...} here")
    args = ap.parse_args()
    if args.workers < 0 or args.batch < 1 or args.steps < 1 or args.warmup < 0:
        sys.exit("need --workers >= 0, --batch >= 1, --steps >= 1, --warmup >= 0")
    torch.set_num_threads(1)  # DataLoader's workers set 1 thread themselves
    torch.manual_seed(args.seed)
    dataset = make_dataset(args)
    if len(dataset) < args.batch:
        sys.exit("the dataset holds %d samples, fewer than one batch" % len(dataset))
    kwargs = dict(batch_size=args.batch, shuffle=True, num_workers=args.workers, drop_last=True)
    if args.workers > 0:
        kwargs.update(persistent_workers=True, prefetch_factor=args.prefetch_factor)
    loader = torch.utils.data.DataLoader(dataset, **kwargs)

    def batches():  # endless, epoch after epoch, like dlscale's sampler
        while True:
            for b in loader:
                yield b

    it = batches()
    shape = None
    for _ in range(args.warmup):
        shape = tuple(next(it)[0].shape)
    start = time.perf_counter()
    for _ in range(args.steps):
        x, _ = next(it)
    wall = time.perf_counter() - start
    shape = tuple(x.shape)
    rate = args.steps * args.batch / wall
    print("peer: DataLoader(num_workers=%d) + main process | %s (%d samples) | batch %s"
          % (args.workers, args.data, len(dataset), "x".join(map(str, shape))))
    print("samples/s: %.1f (%d batches x %d in %.3f s)" % (rate, args.steps, args.batch, wall))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"samples_per_sec": rate, "wall_s": wall, "steps": args.steps,
                       "batch": args.batch, "workers": args.workers, "data": args.data,
                       "shape": list(shape), "torch": torch.__version__,
                       "torchvision": torchvision.__version__}, f)
            f.write("\n")


if __name__ == "__main__":
    main()
