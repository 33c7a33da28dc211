"""The C++ sources of src/ that the layer checks read (check_layers.py,
check_sizes.py)."""
import os


def source_files(root):
    """(folder, path relative to `root`, path) of every .h, .cpp and .cu
    file of src/, in a stable order. The folder is the one under src/, or
    under src/libtorch/ with that prefix ("libtorch/dp")."""
    src = os.path.join(root, "src")
    for dirpath, dirnames, files in os.walk(src):
        dirnames.sort()
        folder = folder_of(os.path.relpath(dirpath, src))
        for name in sorted(files):
            if name.endswith((".h", ".cpp", ".cu")):
                path = os.path.join(dirpath, name)
                yield folder, os.path.relpath(path, root), path


def folder_of(rel_dir):
    """The layer folder of a directory or file path relative to src/."""
    parts = rel_dir.replace(os.sep, "/").split("/")
    if parts[0] == "libtorch" and len(parts) > 1:
        return "libtorch/" + parts[1]
    return parts[0]
