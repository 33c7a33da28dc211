#!/usr/bin/env python3
"""Checks that the folders of src/ are layers and libraries.

The folders of src/ in layer order, lowest first; a file may include headers
of its own folder and of folders below it. Code that needs LibTorch lives
under src/libtorch/, in folders named like the torch-free ones whose
concepts they continue ("libtorch/dp" beside "dp"); every other folder
needs no LibTorch, so a reader tells the two apart by the path alone.
docs/architecture.md states the order in its line "Include order, lowest
first: ..."; this script fails when:
- the two differ, or a folder of src/ is missing from the order;
- an include runs up (but for the exceptions below, each with its reason);
- a file outside src/libtorch/ includes LibTorch or what comes with it
  (ATen, c10, Gloo, MPI, NCCL, CUDA);
- a folder's units are in more than one library of src/CMakeLists.txt
  (executables beside their library's units are not libraries);
- a test file (tests/**/*_test.cpp) is in no test executable of
  tests/CMakeLists.txt: it would never be built, and never fail;
- C++ of src/, tests/ or fuzz/ calls std::filesystem::remove_all, which a
  CUDA PyTorch's libtorch.so replaces by a copy that crashes: remove_tree
  (core/files.h) says why.
ctest runs it as Layers.NoIncludeRunsUp.

    python3 tests/layers/check_layers.py SOURCE_DIR
"""
import os
import re
import sys

from sources import folder_of, source_files

ORDER = ["core", "comm", "data", "models", "dp", "train", "cluster", "slurm", "launch",
         "commbench", "sweep", "report", "predict", "cli",
         "libtorch/compute", "libtorch/comm", "libtorch/data", "libtorch/models", "libtorch/dp",
         "libtorch/train", "libtorch/launch", "libtorch/commbench", "libtorch/predict",
         "libtorch/cli"]

# (file, included folder): why it may include upwards, until it is fixed.
EXCEPTIONS = {}

INCLUDE = re.compile(r'\s*#\s*include\s*"([^"]+)"')
TORCH_INCLUDE = re.compile(r"\s*#\s*include\s*[<\"](torch/|ATen/|c10/|gloo/|mpi\.h|nccl|cuda)")
DOC_LINE = re.compile(r"^Include order, lowest first: (.*)\.$")
LIBRARY = re.compile(r"add_library\((\w+) STATIC(.*?)\)", re.S)
SOURCES = re.compile(r"target_sources\((\w+) PRIVATE([^)]*)\)")
UNIT = re.compile(r"[\w/]+\.(?:cpp|cu)")


def layer_folders(src):
    """Every folder the order must name: those of src/ but libtorch, and
    those of src/libtorch/."""
    top = [d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d))]
    folders = [d for d in top if d != "libtorch"]
    torch_dir = os.path.join(src, "libtorch")
    if os.path.isdir(torch_dir):
        folders += ["libtorch/" + d for d in os.listdir(torch_dir)
                    if os.path.isdir(os.path.join(torch_dir, d))]
    return sorted(folders)


def include_errors(root, rank):
    errors = []
    used = set()
    for folder, rel, path in source_files(root):
        with open(path, encoding="utf-8", errors="replace") as text:
            for number, line in enumerate(text, 1):
                if not folder.startswith("libtorch/") and TORCH_INCLUDE.match(line):
                    errors.append(f"{rel}:{number}: src/{folder}/ is torch-free but includes "
                                  f"{line.strip()[len('#include '):]}: move it under src/libtorch/")
                m = INCLUDE.match(line)
                if not m or "/" not in m.group(1):
                    continue
                target = folder_of(os.path.dirname(m.group(1)))
                if target not in rank or folder not in rank or rank[target] <= rank[folder]:
                    continue
                if (rel, target) in EXCEPTIONS:
                    used.add((rel, target))
                    continue
                errors.append(f"{rel}:{number}: {folder}/ includes {target}/, which is above it")
    for stale in sorted(set(EXCEPTIONS) - used):
        errors.append(f"exception {stale} no longer happens: remove it from {__file__}")
    return errors


def library_errors(root):
    """A folder whose units src/CMakeLists.txt puts in two libraries."""
    with open(os.path.join(root, "src", "CMakeLists.txt"), encoding="utf-8") as f:
        cmake = f.read()
    libraries = {}
    for pattern in (LIBRARY, SOURCES):
        for m in pattern.finditer(cmake):
            for unit in UNIT.findall(m.group(2)):
                libraries.setdefault(folder_of(os.path.dirname(unit)), set()).add(m.group(1))
    return [f"src/{folder}/ has units in {len(libs)} libraries ({', '.join(sorted(libs))}): "
            "a folder is one library" for folder, libs in sorted(libraries.items()) if len(libs) > 1]


def unlisted_test_errors(root):
    """A test file that tests/CMakeLists.txt does not build."""
    tests = os.path.join(root, "tests")
    with open(os.path.join(tests, "CMakeLists.txt"), encoding="utf-8") as f:
        listed = set(UNIT.findall(f.read()))
    errors = []
    for folder, _, files in sorted(os.walk(tests)):
        for name in sorted(files):
            path = os.path.relpath(os.path.join(folder, name), tests)
            if name.endswith("_test.cpp") and path not in listed:
                errors.append(f"tests/{path} is in no test executable of tests/CMakeLists.txt")
    return errors


REMOVE_ALL = re.compile(r"\bremove_all\s*\(")
CPP = (".cpp", ".h", ".cu")


def remove_all_errors(root):
    """A call of std::filesystem::remove_all (any function of that name)."""
    errors = []
    for top in ("src", "tests", "fuzz"):
        for folder, _, files in sorted(os.walk(os.path.join(root, top))):
            for name in sorted(f for f in files if f.endswith(CPP)):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8", errors="replace") as text:
                    for number, line in enumerate(text, 1):
                        if REMOVE_ALL.search(line.split("//")[0]):
                            errors.append(f"{os.path.relpath(path, root)}:{number}: remove_all: "
                                          "use remove_tree (core/files.h)")
    return errors


def main(root):
    errors = []
    src = os.path.join(root, "src")
    for f in layer_folders(src):
        if f not in ORDER:
            errors.append(f"src/{f}/ is not in the layer order ({__file__})")
    rank = {f: i for i, f in enumerate(ORDER)}
    errors += include_errors(root, rank)
    errors += library_errors(root)
    errors += unlisted_test_errors(root)
    errors += remove_all_errors(root)
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
