#!/usr/bin/env python3
"""The fp32 read rate of a cast to each 16-bit wire type and back, as
dlscale's bucketed strategies cast (a preallocated wire buffer's copy_ from
the fp32 bucket, then the bucket's copy_ back), on one thread.

The rate is what `predict` charges a cast at (docs/predict.md): a bucket of
S fp32 bytes costs 2 S / rate, so rate = 2 S / (time down + time up). Prints
each size's median of --repeats, and the system file's line:

    cast_gbyte_s: {fp16: X, bf16: Y}

Run with Debian's interpreter, which sees python3-torch:
    /usr/bin/python3 bench/cast_rate.py [--repeats 7] [--sizes-mb 13,47]
"""
import argparse
import statistics
import sys
import time

import torch


def cast_rate(elements, dtype, repeats):
    """Median fp32 read rate (bytes/s) of a cast down to `dtype` and back."""
    bucket = torch.randn(elements, dtype=torch.float32)
    wire = torch.zeros(elements, dtype=dtype)
    wire.copy_(bucket)  # first touch of both buffers
    bucket.copy_(wire)
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        wire.copy_(bucket)
        bucket.copy_(wire)
        rates.append(2 * 4 * elements / (time.perf_counter() - start))
    return statistics.median(rates)


def refuse(message):
    """One line on stderr, exit 2: bad input."""
    print(f"cast_rate: {message}", file=sys.stderr)
    sys.exit(2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timed casts per size and type (median)")
    parser.add_argument("--sizes-mb", default="13,47",
                        help="fp32 bucket sizes in MB, comma separated (lenet's fc1 is 12.8, resnet18's "
                             "gradient 46.8)")
    args = parser.parse_args()
    if args.repeats < 1:
        refuse("--repeats must be >= 1")
    try:
        sizes = [float(s) for s in args.sizes_mb.split(",")]
    except ValueError:
        refuse(f"--sizes-mb must be numbers, comma separated (got '{args.sizes_mb}')")
    if not all(0 < s <= 4096 for s in sizes):  # NaN fails too
        refuse("each size must be in (0, 4096] MB")
    torch.set_num_threads(1)
    medians = {}
    for name, dtype in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        per_size = []
        for mb in sizes:
            rate = cast_rate(int(mb * 1e6 / 4), dtype, args.repeats)
            per_size.append(rate)
            print(f"{name} {mb:g} MB: {rate / 1e9:.2f} GB/s of fp32 (median of {args.repeats})")
        medians[name] = statistics.median(per_size)
    print(f"cast_gbyte_s: {{fp16: {medians['fp16'] / 1e9:.2f}, bf16: {medians['bf16'] / 1e9:.2f}}}")


if __name__ == "__main__":
    main()
