#!/bin/bash
# Your own model, the whole path (docs/models.md, "Your own model"): export
# TorchScript modules with PyTorch, sweep them over 1 and 2 workers, report.
# Run from the repository's root (the sweep names examples/ relative to it):
#
#   bash examples/own-model/run.sh [DB]
#
# DLSCALE names the dlscale binary (default build/dlscale).
set -euo pipefail
dlscale=${DLSCALE:-build/dlscale}
db=${1:-own-model.db}
/usr/bin/python3 examples/own-model/export.py own-models small-cnn resnet18-10 encoder
"$dlscale" models own-models/small-cnn.pt own-models/resnet18-10.pt --image-size 32
"$dlscale" models own-models/encoder.pt --task-file examples/own-model/encoder.task.yaml
"$dlscale" sweep examples/own-model.yaml --db "$db"
"$dlscale" report --db "$db" --sweep own-model --type weak
