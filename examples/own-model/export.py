#!/usr/bin/python3
"""Exports TorchScript modules for `dlscale train --model PATH.pt`
(docs/models.md, "Your own model"). Run with Debian's /usr/bin/python3,
which has python3-torch and python3-torchvision:

    /usr/bin/python3 examples/own-model/export.py OUTDIR [MODEL...]

MODEL is one of: resnet18 (torchvision's, 1000 classes), resnet18-10
(10 classes), small-cnn (a CNN without batch norm, 10 classes, for 32x32),
encoder (a Transformer encoder classifying token sequences, with
examples/own-model/encoder.task.yaml), translator (forward(src, tgt_in) to
logits over 64 tokens, for 'task: translation'), recommender
(forward(user, item), 600 users and 2000 items, for 'task:
recommendation'), mnist-mlp (1x28x28 images to 10 classes, for a declared
task on IDX data), two-inputs (forward(self, b, a): inputs matched by
name), and the broken ones the tests feed dlscale: raises, no-params. Without MODEL it writes resnet18-10, small-cnn and
encoder. It prints each file and its parameter count as PyTorch counts it.
"""
import os
import sys

import torch
from torch import nn


class SmallCnn(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1, stride=2)
        self.fc = nn.Linear(32 * 16 * 16, classes)

    def forward(self, image):
        x = torch.relu(self.conv1(image))
        x = torch.relu(self.conv2(x))
        return self.fc(torch.flatten(x, 1))


class Encoder(nn.Module):
    """Token sequences of 16 (vocabulary 1000) to 8 classes; dropout 0."""

    def __init__(self, vocab: int = 1000, d: int = 64, classes: int = 8, length: int = 16):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.position = nn.Parameter(torch.zeros(length, d))
        layer = nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, tokens):
        x = self.embed(tokens) + self.position
        return self.head(self.encoder(x).mean(1))


class Translator(nn.Module):
    """Token sequences to logits over `vocab` tokens at each position. The
    source is read reversed, so the synthetic translation task (each token
    mapped, the sequence reversed) is a per-position dictionary to learn."""

    def __init__(self, vocab: int = 64, d: int = 32):
        super().__init__()
        self.source = nn.Embedding(vocab, d)
        self.target = nn.Embedding(vocab, d)
        self.hidden = nn.Linear(d, d)
        self.out = nn.Linear(d, vocab)

    def forward(self, src, tgt_in):
        x = self.source(src).flip(1) + self.target(tgt_in)
        return self.out(torch.relu(self.hidden(x)))


class Recommender(nn.Module):
    """A user and an item to a score (matrix factorization); for evaluation
    a user ([batch]) and candidate items ([batch, candidates])."""

    def __init__(self, users: int = 600, items: int = 2000, d: int = 16):
        super().__init__()
        self.users = nn.Embedding(users, d)
        self.items = nn.Embedding(items, d)
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, user, item):
        u = self.users(user)
        if item.dim() > user.dim():
            u = u.unsqueeze(1)
        return (u * self.items(item)).sum(-1) + self.bias


class MnistMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(28 * 28, 32)
        self.out = nn.Linear(32, 10)

    def forward(self, image):
        return self.out(torch.relu(self.hidden(torch.flatten(image, 1))))


class TwoInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fa = nn.Linear(8, 4)
        self.fb = nn.Linear(2, 4)

    def forward(self, b, a):
        return self.fa(a) + self.fb(b)


class Raises(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3 * 32 * 32, 10)

    def forward(self, image):
        if bool(image.sum() > -1e30):
            raise ValueError("this module refuses every input")
        return self.fc(torch.flatten(image, 1))


class NoParams(nn.Module):
    def forward(self, image):
        return torch.flatten(image, 1)[:, :10]


def make(name):
    torch.manual_seed(0)
    if name in ("resnet18", "resnet18-10"):
        import torchvision
        return torchvision.models.resnet18(num_classes=1000 if name == "resnet18" else 10)
    return {"small-cnn": SmallCnn, "encoder": Encoder, "translator": Translator,
            "recommender": Recommender, "mnist-mlp": MnistMlp, "two-inputs": TwoInputs,
            "raises": Raises, "no-params": NoParams}[name]()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name in sys.argv[2:] or ["resnet18-10", "small-cnn", "encoder"]:
        model = make(name).eval()
        path = os.path.join(out, name + ".pt")
        torch.jit.script(model).save(path)
        print(path, sum(p.numel() for p in model.parameters()))


if __name__ == "__main__":
    main()
