#!/usr/bin/env python3
"""Prints torchvision's parameter counts and forward multiply-accumulates per
sample (conv + linear layers, counted with forward hooks) for the models of
dlscale's zoo (parameters alone for transformer and ncf, whose attention
products torch.nn.MultiheadAttention computes without Linear modules), as a check of tests/models/model_test.cpp's expected values.

Run with Debian's interpreter, which sees python3-torch/python3-torchvision:
    /usr/bin/python3 bench/torchvision_reference.py [--image-size N]
"""
import argparse
import json

import torch

from peer_models import build_model


def count_macs(model, channels, size):
    macs = 0

    def conv_hook(m, inp, out):
        nonlocal macs
        macs += m.weight.numel() * out.shape[-1] * out.shape[-2]

    def fc_hook(m, inp, out):
        nonlocal macs
        macs += m.weight.numel() * (inp[0].numel() // inp[0].shape[0] // m.in_features)

    hooks = []
    for m in model.modules():
        if isinstance(m, torch.nn.Conv2d):
            hooks.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, torch.nn.Linear):
            hooks.append(m.register_forward_hook(fc_hook))
    model.eval()
    with torch.no_grad():
        model(torch.zeros(1, channels, size, size))
    for h in hooks:
        h.remove()
    return macs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image-size", type=int, default=0, help="0 = each model's default")
    ap.add_argument("--models", default="",
                    help="comma-separated names to print (default: all; bench/peer_smoke.sh's quick run "
                         "names two)")
    args = ap.parse_args()
    images = [
        ("lenet", 28, 1), ("alexnet", 224, 3), ("vgg11", 224, 3), ("vgg16", 224, 3),
        ("vgg19", 224, 3), ("resnet18", 224, 3), ("resnet34", 224, 3), ("resnet50", 224, 3),
        ("resnet101", 224, 3), ("resnet152", 224, 3), ("googlenet", 224, 3),
        ("inception3", 299, 3)]
    others = ("transformer", "transformer-big", "gnmt", "ncf")
    known = [i[0] for i in images] + ["ssd300"] + list(others)
    wanted = set(filter(None, args.models.split(","))) or set(known)
    unknown = sorted(wanted - set(known))
    if unknown:
        ap.error("unknown model %s; known: %s" % (", ".join(unknown), ", ".join(known)))
    rows = []
    for name, default_size, channels in [i for i in images if i[0] in wanted]:
        size = args.image_size or default_size
        for aux in ([False, True] if name in ("googlenet", "inception3") else [False]):
            model = build_model(name, size, aux_logits=aux)
            params = sum(p.numel() for p in model.parameters())
            try:
                macs = count_macs(model, channels, size)
            except RuntimeError as e:  # input too small for the architecture
                rows.append({"name": name, "aux_logits": aux, "image_size": size,
                             "error": str(e).splitlines()[0]})
                continue
            rows.append({"name": name, "aux_logits": aux, "image_size": size, "parameters": params,
                         "macs_per_sample": macs})
    if "ssd300" in wanted:
        ssd = build_model("ssd300")
        rows.append({"name": "ssd300", "image_size": 300,
                     "parameters": sum(p.numel() for p in ssd.parameters()),
                     "macs_per_sample": count_macs(ssd, 3, 300)})
    for name in [o for o in others if o in wanted]:
        model = build_model(name)
        rows.append({"name": name, "parameters": sum(p.numel() for p in model.parameters())})
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
