#!/usr/bin/env python3
"""Checks that no include in src/ runs up the layers.

The folders of src/ in layer order, lowest first; a file may include headers
of its own folder and of folders below it. docs/architecture.md states the
same order in its line "Include order, lowest first: ..."; this script fails
when the two differ, when a folder of src/ is missing from the order, or
when an include runs up (but for the exceptions below, each with its
reason). ctest runs it as Layers.NoIncludeRunsUp.

    python3 tests/layers/check_layers.py SOURCE_DIR
"""
import os
import re
import sys

from sources import source_files

ORDER = ["core", "compute", "comm", "data", "models", "dp", "train", "cluster", "slurm",
         "launch", "commbench", "sweep", "report", "predict", "cli"]

# (file, included folder): why it may include upwards, until it is fixed.
EXCEPTIONS = {}

INCLUDE = re.compile(r'\s*#\s*include\s*"([A-Za-z0-9_]+)/')
DOC_LINE = re.compile(r"^Include order, lowest first: (.*)\.$")


def main(root):
    errors = []
    src = os.path.join(root, "src")
    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for f in folders:
        if f not in ORDER:
            errors.append(f"src/{f}/ is not in the layer order ({__file__})")
    rank = {f: i for i, f in enumerate(ORDER)}
    used = set()
    for folder, rel, path in source_files(root):
        with open(path, encoding="utf-8", errors="replace") as text:
            for number, line in enumerate(text, 1):
                m = INCLUDE.match(line)
                if not m or m.group(1) not in rank or folder not in rank:
                    continue
                target = m.group(1)
                if rank[target] <= rank[folder]:
                    continue
                if (rel, target) in EXCEPTIONS:
                    used.add((rel, target))
                    continue
                errors.append(f"{rel}:{number}: {folder}/ includes {target}/, which is above it")
    for stale in sorted(set(EXCEPTIONS) - used):
        errors.append(f"exception {stale} no longer happens: remove it from {__file__}")
    doc = os.path.join(root, "docs", "architecture.md")
    stated = None
    with open(doc, encoding="utf-8") as text:
        for line in text:
            m = DOC_LINE.match(line.strip())
            if m:
                stated = [w.strip(" `") for w in m.group(1).split(",")]
    if stated != ORDER:
        errors.append(f"docs/architecture.md states the include order {stated}, this script {ORDER}")
    for e in errors:
        print(e)
    print(f"{len(errors)} problem(s); order: {', '.join(ORDER)}")
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
