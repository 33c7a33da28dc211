#!/usr/bin/python3
"""torchvision's Mask R-CNN parts on the cases tests/models/maskrcnn_parts_test.cpp writes.

    maskrcnn_reference.py CASES.json RESULTS.json

Each case names an op and holds its inputs as flat lists with their shapes;
each result holds torchvision's outputs the same way (RoIAlign also the
gradient of the features for the case's output gradient; the network's
case, torchvision's parameter counts). Debian's
python3-torch and python3-torchvision (the LibTorch dlscale builds on).
"""
import json
import math
import sys

import torch
from torchvision.models import resnet50
from torchvision.models.detection import maskrcnn_resnet50_fpn
from torchvision.models.detection._utils import BoxCoder, Matcher
from torchvision.models.detection.backbone_utils import _resnet_fpn_extractor
from torchvision.models.detection.mask_rcnn import MaskRCNN
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.roi_heads import fastrcnn_loss, maskrcnn_loss
from torchvision.models.detection.rpn import RegionProposalNetwork
from torchvision.ops import MultiScaleRoIAlign, box_iou, clip_boxes_to_image, nms, remove_small_boxes, roi_align
from torchvision.ops.boxes import _batched_nms_vanilla
from torchvision.ops.misc import FrozenBatchNorm2d


def tensor(case, key, dtype):
    return torch.tensor(case[key], dtype=dtype).reshape(case[key + "_shape"])


def flat(t):
    """A tensor's values as a list, NaN as null (JSON has no NaN)."""
    return [None if math.isnan(v) else v for v in t.detach().flatten().tolist()]


def counts(case):
    """MLPerf's configuration (frozen batch norm, stem and first stage frozen:
    trainable_backbone_layers=3), counted by part; frozen batch norm's weight
    and bias count as frozen parameters, as they are parameters in the
    default maskrcnn_resnet50_fpn (batch norm that trains)."""
    model = MaskRCNN(_resnet_fpn_extractor(resnet50(norm_layer=FrozenBatchNorm2d), 3), case["classes"])

    def frozen_bn(module):
        return sum(m.weight.numel() + m.bias.numel() for m in module.modules() if isinstance(m, FrozenBatchNorm2d))

    def total(*modules):
        return sum(p.numel() for m in modules for p in m.parameters()) + sum(frozen_bn(m) for m in modules)

    heads = model.roi_heads
    default = maskrcnn_resnet50_fpn(weights=None, weights_backbone=None, num_classes=case["classes"])
    return {"trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
            "frozen": sum(p.numel() for p in model.parameters() if not p.requires_grad) + frozen_bn(model),
            "backbone": total(model.backbone), "rpn": total(model.rpn),
            "box": total(heads.box_head, heads.box_predictor), "mask": total(heads.mask_head, heads.mask_predictor),
            "default_total": sum(p.numel() for p in default.parameters())}


def run(case):
    dtype = torch.float64 if case.get("dtype") == "double" else torch.float32
    op = case["op"]
    if op == "roi_align":
        features = tensor(case, "features", dtype).requires_grad_()
        rois = tensor(case, "rois", dtype)
        out = roi_align(features, rois, (case["pooled_height"], case["pooled_width"]),
                        case["spatial_scale"], case["sampling_ratio"], case["aligned"])
        out.backward(tensor(case, "grad", dtype).reshape(out.shape))
        return {"out": flat(out), "grad": flat(features.grad)}
    if op == "multiscale":
        maps = {str(i): tensor(case, f"map{i}", dtype).requires_grad_() for i in range(case["levels"])}
        rois = tensor(case, "rois", dtype)
        boxes = [rois[rois[:, 0] == b, 1:] for b in range(case["images"])]
        pooler = MultiScaleRoIAlign(list(maps), (case["pooled_height"], case["pooled_width"]), case["sampling_ratio"])
        out = pooler(maps, boxes, [tuple(case["image_size"])] * case["images"])
        out.backward(tensor(case, "grad", dtype).reshape(out.shape))
        result = {"out": flat(out), "levels": pooler.map_levels(boxes).tolist()}
        for i, m in enumerate(maps.values()):
            result[f"grad{i}"] = flat(torch.zeros_like(m) if m.grad is None else m.grad)
        return result
    if op == "anchors":
        height, width = case["image_size"]
        generator = AnchorGenerator(tuple((s,) for s in case["sizes"]),
                                    (tuple(case["aspect_ratios"]),) * len(case["sizes"]))
        images = ImageList(torch.zeros(1, 3, height, width), [(height, width)])
        maps = [torch.zeros(1, 1, h, w) for h, w in case["grids"]]
        return {"out": flat(generator(images, maps)[0])}
    if op == "match":
        matcher = Matcher(case["high"], case["low"], case["allow_low_quality"])
        return {"matches": matcher(tensor(case, "quality", dtype)).tolist()}
    if op == "counts":
        return counts(case)
    if op == "proposals":
        top = {"training": case["pre_nms_top_n"], "testing": case["pre_nms_top_n"]}
        kept = {"training": case["post_nms_top_n"], "testing": case["post_nms_top_n"]}
        rpn = RegionProposalNetwork(None, None, 0.7, 0.3, 256, 0.5, top, kept, 0.7)
        boxes = tensor(case, "boxes", dtype)
        shapes = [tuple(case["image_size"])] * boxes.shape[0]
        out, _ = rpn.filter_proposals(boxes, tensor(case, "objectness", dtype), shapes, case["per_level"])
        return {f"out{i}": flat(b) for i, b in enumerate(out)}
    if op == "fastrcnn_loss":
        classification, box = fastrcnn_loss(tensor(case, "logits", dtype), tensor(case, "codes", dtype),
                                             [torch.tensor(case["labels"])], [tensor(case, "targets", dtype)])
        return {"classification": classification.item(), "box": box.item()}
    if op == "maskrcnn_loss":
        objects = torch.tensor(case["objects"])
        gt_labels = torch.tensor(case["gt_labels"])
        loss = maskrcnn_loss(tensor(case, "logits", dtype), [tensor(case, "proposals", dtype)],
                             [tensor(case, "masks", dtype)], [gt_labels], [objects])
        return {"loss": loss.item()}
    if op == "nms":
        return {"keep": nms(tensor(case, "boxes", dtype), tensor(case, "scores", dtype),
                            case["threshold"]).tolist()}
    if op == "batched_nms":
        categories = torch.tensor(case["categories"], dtype=torch.int64)
        return {"keep": _batched_nms_vanilla(tensor(case, "boxes", dtype), tensor(case, "scores", dtype),
                                             categories, case["threshold"]).tolist()}
    if op == "box_iou":
        return {"out": flat(box_iou(tensor(case, "boxes", dtype), tensor(case, "others", dtype)))}
    if op == "clip":
        return {"out": flat(clip_boxes_to_image(tensor(case, "boxes", dtype), (case["height"], case["width"])))}
    if op == "at_least":
        return {"keep": remove_small_boxes(tensor(case, "boxes", dtype), case["min_size"]).tolist()}
    if op in ("encode", "decode"):
        coder = BoxCoder(tuple(case["weights"]))
        if op == "encode":
            return {"out": flat(coder.encode_single(tensor(case, "boxes", dtype), tensor(case, "others", dtype)))}
        return {"out": flat(coder.decode_single(tensor(case, "codes", dtype), tensor(case, "others", dtype)))}
    raise SystemExit(f"maskrcnn_reference.py: unknown op '{op}'")


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: maskrcnn_reference.py CASES.json RESULTS.json")
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    results = [run(c) for c in cases]
    with open(sys.argv[2], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
