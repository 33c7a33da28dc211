#!/usr/bin/env python3
"""Writes an ImageFolder of seeded synthetic JPEGs for `dlscale data bench`
and its PyTorch peer (bench/data_loader_peer.py): OUT_DIR/class_K/img_NNNNN.jpg,
10 classes by default, RGB, square, baseline JPEG. Each class is a distinct
smooth colour pattern (a sinusoidal wave with its own hue, frequency and
direction) plus per-image phase jitter and pixel noise, so the set is
learnable yet every image decodes to different pixels.

    /usr/bin/python3 bench/make_image_folder.py /tmp/dlscale-jpeg-folder
    /usr/bin/python3 bench/make_image_folder.py OUT_DIR --images 2000 --size 128
    # ImageNet-shaped: 500x375 (ImageNet's typical size), quality 90
    /usr/bin/python3 bench/make_image_folder.py OUT_DIR --images 50000 --width 500 --height 375
    # a million files that cost almost no disk: 1,000 JPEGs, each hard-linked
    # under 1,000 names (for listing at scale, bench/data_scale_bench.sh)
    /usr/bin/python3 bench/make_image_folder.py OUT_DIR --images 1000 --classes 1000 --size 32 --files 1000000
"""
import argparse
import math
import os
import sys

import numpy as np
from PIL import Image


def class_pattern(k, classes, height, width, rng):
    """One image of class k: float32 HxWx3 in [0, 255]."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    y /= height
    x /= width
    angle = math.pi * k / classes                 # the wave's direction
    freq = 1.5 + 0.75 * (k % 4)                   # and spatial frequency
    hue = 2 * math.pi * k / classes               # the class's colour
    phase = rng.uniform(0, 2 * math.pi)           # per-image jitter
    t = np.cos(angle) * x + np.sin(angle) * y
    wave = 0.5 + 0.5 * np.sin(2 * math.pi * freq * t + phase)
    img = np.empty((height, width, 3), np.float32)
    for c in range(3):
        base = 0.5 + 0.5 * math.cos(hue + 2 * math.pi * c / 3)
        img[..., c] = 255 * (0.25 * base + 0.75 * base * wave)
    img += rng.normal(0, 12, img.shape).astype(np.float32)
    return np.clip(img, 0, 255)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--images", type=int, default=2000, help="images in all")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--size", type=int, default=128, help="height = width, pixels")
    ap.add_argument("--width", type=int, default=0, help="width in pixels (default --size)")
    ap.add_argument("--height", type=int, default=0, help="height in pixels (default --size)")
    ap.add_argument("--quality", type=int, default=90, help="JPEG quality")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--files", type=int, default=0,
                    help="files in all: --images JPEGs are written, the rest are hard links to them "
                         "in the same class (default: --images)")
    args = ap.parse_args()
    if args.images < args.classes or args.classes < 1 or args.size < 1:
        sys.exit("need --images >= --classes >= 1 and --size >= 1")
    width = args.width or args.size
    height = args.height or args.size
    if width < 1 or height < 1:
        sys.exit("need --width and --height >= 1")
    rng = np.random.default_rng(args.seed)
    for k in range(args.classes):
        os.makedirs(os.path.join(args.out_dir, "class_%02d" % k), exist_ok=True)
    for i in range(args.images):
        k = i % args.classes
        pixels = class_pattern(k, args.classes, height, width, rng)
        path = os.path.join(args.out_dir, "class_%02d" % k, "img_%05d.jpg" % i)
        Image.fromarray(pixels.astype(np.uint8), "RGB").save(path, "JPEG", quality=args.quality)
    per_class = args.images // args.classes
    for j in range(args.images, args.files):  # more names for the same images
        k = j % args.classes
        source = k + args.classes * ((j // args.classes) % per_class)
        os.link(os.path.join(args.out_dir, "class_%02d" % k, "img_%05d.jpg" % source),
                os.path.join(args.out_dir, "class_%02d" % k, "img_%05d.jpg" % j))
    print("wrote %d %dx%d JPEGs in %d classes to %s%s" %
          (args.images, width, height, args.classes, args.out_dir,
           " (%d files, with hard links)" % args.files if args.files > args.images else ""))


if __name__ == "__main__":
    main()
