"""The C++ sources of src/ that the layer checks read (check_layers.py,
check_sizes.py)."""
import os


def source_files(root):
    """(folder under src/, path relative to `root`, path) of every .h, .cpp
    and .cu file of src/, in a stable order."""
    src = os.path.join(root, "src")
    for dirpath, dirnames, files in os.walk(src):
        dirnames.sort()
        folder = os.path.relpath(dirpath, src).split(os.sep)[0]
        for name in sorted(files):
            if name.endswith((".h", ".cpp", ".cu")):
                path = os.path.join(dirpath, name)
                yield folder, os.path.relpath(path, root), path
