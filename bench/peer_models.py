"""The peer's models: torchvision's architectures, plus the TensorFlow
deep-MNIST LeNet that torchvision lacks, the Transformer (torch.nn.Transformer
with a tied embedding), MLPerf's NeuMF and SSD300, defined exactly like dlscale's."""
import math

import torch
import torchvision.models as tv


class LeNet(torch.nn.Module):
    """2 × (5×5 SAME conv, ReLU, 2×2 max-pool), FC 1024 + dropout, classifier."""

    def __init__(self, image_size=28, num_classes=10):
        super().__init__()
        side = image_size // 4
        self.conv1 = torch.nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = torch.nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = torch.nn.Linear(side * side * 64, 1024)
        self.dropout = torch.nn.Dropout(0.5)
        self.fc2 = torch.nn.Linear(1024, num_classes)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = self.dropout(torch.relu(self.fc1(x.flatten(1))))
        return self.fc2(x)


class Transformer(torch.nn.Module):
    """torch.nn.Transformer (post-norm, ReLU, final norms) with one token
    embedding shared by source and target, scaled by sqrt(d), plus sinusoidal
    positions, and tied to the output projection (no bias)."""

    def __init__(self, vocab=32768, d_model=512, heads=8, ff=2048, layers=6, dropout=0.1):
        super().__init__()
        self.d_model = d_model
        self.embedding = torch.nn.Embedding(vocab, d_model)
        self.core = torch.nn.Transformer(d_model, heads, layers, layers, ff, dropout, batch_first=True)
        self.dropout = torch.nn.Dropout(dropout)
        torch.nn.init.normal_(self.embedding.weight, 0.0, d_model ** -0.5)

    def embed(self, tokens):
        length = tokens.shape[1]
        pos = torch.arange(length, dtype=torch.float64).unsqueeze(1)
        rates = torch.exp(torch.arange(0, self.d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / self.d_model))
        pe = torch.zeros(length, self.d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(pos * rates)
        pe[:, 1::2] = torch.cos(pos * rates)[:, : self.d_model // 2]
        # Built on the CPU in float64, then moved beside the tokens (a GPU run).
        pe = pe.to(device=tokens.device, dtype=self.embedding.weight.dtype)
        x = self.embedding(tokens) * math.sqrt(self.d_model) + pe
        return self.dropout(x)

    def forward(self, src, tgt_in):
        length = tgt_in.shape[1]
        causal = torch.full((length, length), float("-inf"), device=tgt_in.device).triu(1)
        h = self.core(self.embed(src), self.embed(tgt_in), tgt_mask=causal)
        return torch.nn.functional.linear(h, self.embedding.weight)


class Gnmt(torch.nn.Module):
    """MLPerf's GNMT (rnn_translator): a 4-layer LSTM encoder (the first
    bidirectional, residuals from the third), a 4-layer decoder whose first
    layer feeds normalized Bahdanau attention, the context concatenated to
    every later layer's input, one shared embedding, a linear classifier."""

    def __init__(self, vocab=32320, hidden=1024, dropout=0.2):
        super().__init__()
        h = hidden
        self.embedding = torch.nn.Embedding(vocab, h)
        lstm = lambda i, bi=False: torch.nn.LSTM(i, h, batch_first=True, bidirectional=bi)
        self.encoder = torch.nn.ModuleList([lstm(h, True), lstm(2 * h), lstm(h), lstm(h)])
        self.attention_rnn = lstm(h)
        self.query = torch.nn.Linear(h, h, bias=False)
        self.key = torch.nn.Linear(h, h, bias=False)
        self.v = torch.nn.Parameter(torch.empty(h).uniform_(-0.1, 0.1))
        self.gain = torch.nn.Parameter(torch.full((1,), h ** -0.5))
        self.bias = torch.nn.Parameter(torch.zeros(h))
        self.decoder = torch.nn.ModuleList([lstm(2 * h) for _ in range(3)])
        self.classifier = torch.nn.Linear(h, vocab)
        self.dropout = torch.nn.Dropout(dropout)

    def attend(self, query, keys):
        s = torch.tanh(self.query(query).unsqueeze(2) + self.key(keys).unsqueeze(1) + self.bias)
        scores = s.matmul(self.v / self.v.norm() * self.gain)
        return torch.bmm(scores.softmax(-1), keys)

    def forward(self, src, tgt_in):
        d = self.dropout
        x, _ = self.encoder[0](d(self.embedding(src)))
        x, _ = self.encoder[1](d(x))
        for layer in self.encoder[2:]:
            x = x + layer(d(x))[0]
        y, _ = self.attention_rnn(d(self.embedding(tgt_in)))
        a = self.attend(y, x)
        x, _ = self.decoder[0](d(torch.cat([y, a], -1)))
        for layer in self.decoder[1:]:
            x = x + layer(d(torch.cat([x, a], -1)))[0]
        return self.classifier(x)


class NeuMF(torch.nn.Module):
    """MLPerf's NCF: GMF 64 and MLP 256-256-128-64 over user and item embeddings."""

    def __init__(self, users=138493, items=26744, gmf=64, mlp=(256, 256, 128, 64), sparse=False):
        super().__init__()
        self.gmf_user = torch.nn.Embedding(users, gmf, sparse=sparse)
        self.gmf_item = torch.nn.Embedding(items, gmf, sparse=sparse)
        self.mlp_user = torch.nn.Embedding(users, mlp[0] // 2, sparse=sparse)
        self.mlp_item = torch.nn.Embedding(items, mlp[0] // 2, sparse=sparse)
        self.mlp = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(mlp[:-1], mlp[1:]))
        self.final = torch.nn.Linear(gmf + mlp[-1], 1)

    def forward(self, user, item):
        gmf = self.gmf_user(user) * self.gmf_item(item)
        x = torch.cat([self.mlp_user(user), self.mlp_item(item)], -1)
        for layer in self.mlp:
            x = torch.relu(layer(x))
        return self.final(torch.cat([gmf, x], -1)).squeeze(-1)


class Ssd300(torch.nn.Module):
    """MLPerf v0.5's SSD300: torchvision's ResNet-34 up to layer3 (its first
    block at stride 1, so the features stay 38x38), five extra blocks (1x1
    then 3x3 convolutions with ReLU) down to 19, 10, 5, 3 and 1, and a 3x3
    box head (4 offsets) and class head per feature map, with 4, 6, 6, 6, 4
    and 4 default boxes a position: 8,732 in all. Output [batch, 4 + classes,
    8732], the offsets first."""

    CHANNELS = (256, 512, 512, 256, 256, 256)
    BOXES = (4, 6, 6, 6, 4, 4)

    def __init__(self, num_classes=81):
        super().__init__()
        rn = tv.resnet34(weights=None)
        block = rn.layer3[0]
        block.conv1.stride = (1, 1)
        block.downsample[0].stride = (1, 1)
        self.backbone = torch.nn.Sequential(rn.conv1, rn.bn1, rn.relu, rn.maxpool, rn.layer1, rn.layer2,
                                            rn.layer3)
        c = self.CHANNELS
        extra = []
        for i, (mid, stride, pad) in enumerate([(256, 2, 1), (256, 2, 1), (128, 2, 1), (128, 1, 0), (128, 1, 0)]):
            extra.append(torch.nn.Sequential(
                torch.nn.Conv2d(c[i], mid, 1), torch.nn.ReLU(inplace=True),
                torch.nn.Conv2d(mid, c[i + 1], 3, stride=stride, padding=pad), torch.nn.ReLU(inplace=True)))
        self.extra = torch.nn.ModuleList(extra)
        self.loc = torch.nn.ModuleList(torch.nn.Conv2d(ch, k * 4, 3, padding=1) for ch, k in zip(c, self.BOXES))
        self.conf = torch.nn.ModuleList(torch.nn.Conv2d(ch, k * num_classes, 3, padding=1)
                                        for ch, k in zip(c, self.BOXES))
        self.num_classes = num_classes

    def forward(self, x):
        maps = [self.backbone(x)]
        for block in self.extra:
            maps.append(block(maps[-1]))
        n = x.shape[0]
        loc = torch.cat([head(m).reshape(n, 4, -1) for head, m in zip(self.loc, maps)], 2)
        conf = torch.cat([head(m).reshape(n, self.num_classes, -1) for head, m in zip(self.conf, maps)], 2)
        return torch.cat([loc, conf], 1)


def maskrcnn_width(height):
    """dlscale's maskrcnn input width for its --image-size (height)."""
    return (height * 1333 + 400) // 800


def mask_rcnn(classes, height, rois):
    """torchvision's Mask R-CNN in MLPerf's configuration (ResNet-50 on frozen
    batch norm, stem and first stage frozen), taking height x maskrcnn_width
    images as they are (its transform's sizes are theirs), sampling `rois`
    RoIs an image. Its frozen batch norms take the statistics of one forward
    pass over noise, as dlscale's stand-in for pretrained weights does
    (identity statistics let the activations grow to overflow)."""
    from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
    from torchvision.models.detection.mask_rcnn import MaskRCNN
    from torchvision.ops.misc import FrozenBatchNorm2d
    backbone = _resnet_fpn_extractor(tv.resnet50(norm_layer=FrozenBatchNorm2d), 3)

    def calibrate(module, inputs):
        x = inputs[0]
        module.running_mean.copy_(x.mean((0, 2, 3)))
        module.running_var.copy_(x.var((0, 2, 3), unbiased=False))

    hooks = [m.register_forward_pre_hook(calibrate) for m in backbone.modules()
             if isinstance(m, FrozenBatchNorm2d)]
    with torch.no_grad():
        backbone(torch.randn(2, 3, 128, 128))
    for h in hooks:
        h.remove()
    # Images go in as they are (mean 0, std 1), as dlscale's maskrcnn takes
    # them: torchvision's ImageNet normalisation would scale them ~4x away
    # from the statistics calibrated above.
    return MaskRCNN(backbone, classes, min_size=height, max_size=maskrcnn_width(height),
                    box_batch_size_per_image=rois, image_mean=[0.0, 0.0, 0.0], image_std=[1.0, 1.0, 1.0])


def build_model(name, image_size=None, num_classes=None, aux_logits=False, vocab=None, hidden=None,
                sparse=False, rois=512):
    """torchvision model `name` (untrained), the LeNet above, the
    Transformer, GNMT or NeuMF above, or a TorchScript module saved at
    `name` (PATH.pt, as `dlscale train --model PATH.pt` takes it)."""
    if name.endswith((".pt", ".pth")):
        return torch.jit.load(name)
    if name == "maskrcnn":
        return mask_rcnn(num_classes or 81, image_size or 800, rois)
    if name == "transformer":
        return Transformer(vocab or 32768)
    if name == "transformer-big":
        return Transformer(vocab or 32768, 1024, 16, 4096, 6, 0.3)
    if name == "ncf":
        return NeuMF(sparse=sparse)
    if name == "ssd300":
        return Ssd300(num_classes or 81)
    if name == "gnmt":
        return Gnmt(vocab or 32320, hidden or 1024)
    if name == "lenet":
        return LeNet(image_size, num_classes or 10)
    classes = num_classes or 1000
    if name == "googlenet":
        return tv.googlenet(weights=None, aux_logits=aux_logits, init_weights=True,
                            num_classes=classes)
    if name == "inception3":
        return tv.inception_v3(weights=None, aux_logits=aux_logits, init_weights=True,
                               num_classes=classes)
    ctor = {"alexnet": tv.alexnet, "vgg11": tv.vgg11, "vgg16": tv.vgg16, "vgg19": tv.vgg19,
            "resnet18": tv.resnet18, "resnet34": tv.resnet34, "resnet50": tv.resnet50,
            "resnet101": tv.resnet101, "resnet152": tv.resnet152}[name]
    return ctor(weights=None, num_classes=classes)
