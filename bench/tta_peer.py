#!/usr/bin/python3
"""PyTorch eager peer of `dlscale train ... --target-accuracy`: Fashion-MNIST
to a target test accuracy with the same model, recipe and batch.

Model: dlscale's `tinycnn` (two 3x3 conv-BN-ReLU blocks of 16 and 32
channels, each with 2x2 max-pooling, then a linear classifier), LibTorch's
default initialisation. Data: Debian's dataset-fashion-mnist through
torchvision's FashionMNIST, normalised by the training split's mean and std,
no augmentation, a fresh permutation each epoch, last partial batch dropped;
held in memory as one tensor and indexed per batch (the fastest way to feed
a 60,000-image set, faster than a DataLoader). Recipe: SGD with Nesterov
momentum 0.9, OneCycleLR (cycle_momentum=False) or a constant rate, weight
decay, label smoothing. Evaluation after each epoch on the 10,000 test images in batches of
256, in eval mode; stops at the first evaluation reaching --target.

Prints `time to accuracy: S s` (the training loop, evaluations included, as
dlscale's run_start -> run_stop) and `wall: S s` (the whole script).

Run with Debian's Python (it has python3-torch and python3-torchvision):
    /usr/bin/python3 bench/tta_peer.py --batch 256 --lr 0.2 --epochs 2 --target 0.9
"""
import argparse
import os
import sys
import tempfile
import time

START = time.perf_counter()

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import torchvision  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from data_loader_peer import fashion_mnist_root  # noqa: E402


class TinyCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


def load(root, train):
    ds = torchvision.datasets.FashionMNIST(root, train=train, download=False)
    return ds.data.float().div_(255).unsqueeze(1), ds.targets.long()


def evaluate(model, images, labels, channels_last):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(labels), 256):
            x = images[i:i + 256]
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            correct += (model(x).argmax(1) == labels[i:i + 256]).sum().item()
    model.train()
    return correct / len(labels)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--schedule", choices=["onecycle", "constant"], default="onecycle")
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--target", type=float, default=0.9)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--train-samples", type=int, default=0,
                   help="train on the first N training images only (0 = all 60,000; "
                        "bench/peer_smoke.sh's quick run)")
    p.add_argument("--test-samples", type=int, default=0,
                   help="evaluate on the first N test images only (0 = all 10,000)")
    p.add_argument("--contiguous", action="store_true",
                   help="NCHW tensors (default: channels-last, as dlscale's default)")
    p.add_argument("--cache-root", default=os.path.join(tempfile.gettempdir(), "dlscale-peer-data"))
    a = p.parse_args()
    if a.train_samples < 0 or a.test_samples < 0:
        p.error("--train-samples and --test-samples must be >= 0")
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    channels_last = not a.contiguous
    root = fashion_mnist_root(a.cache_root)
    train_x, train_y = load(root, True)
    test_x, test_y = load(root, False)
    mean, std = train_x.mean().item(), train_x.std().item()
    train_x.sub_(mean).div_(std)
    test_x.sub_(mean).div_(std)
    if a.train_samples:
        train_x, train_y = train_x[:a.train_samples], train_y[:a.train_samples]
    if a.test_samples:
        test_x, test_y = test_x[:a.test_samples], test_y[:a.test_samples]
    if len(train_y) < a.batch:
        p.error("--batch %d is more than the %d training images" % (a.batch, len(train_y)))
    model = TinyCnn()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum, nesterov=True,
                          weight_decay=a.weight_decay)
    steps_per_epoch = len(train_y) // a.batch
    sched = None
    if a.schedule == "onecycle":
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, cycle_momentum=False,
                                                    total_steps=a.epochs * steps_per_epoch)
    run_start = time.perf_counter()
    status, acc, epoch = "aborted", 0.0, 0
    for epoch in range(1, a.epochs + 1):
        order = torch.randperm(len(train_y))
        for s in range(steps_per_epoch):
            idx = order[s * a.batch:(s + 1) * a.batch]
            x = train_x[idx]
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            loss = F.cross_entropy(model(x), train_y[idx], label_smoothing=a.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if sched is not None:
                sched.step()
        acc = evaluate(model, test_x, test_y, channels_last)
        print("eval  epoch %d  top-1 %.2f%%" % (epoch, 100 * acc), flush=True)
        if acc >= a.target:
            status = "success"
            break
    run = time.perf_counter() - run_start
    print("status: %s after %d epochs, top-1 %.2f%%" % (status, epoch, 100 * acc))
    print("time to accuracy: %.3f s" % run)
    print("wall: %.3f s" % (time.perf_counter() - START))
    return 0 if status == "success" else 3


if __name__ == "__main__":
    sys.exit(main())
