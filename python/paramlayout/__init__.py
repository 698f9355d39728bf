"""paramlayout: plan and verify Megatron-LM's parameter and gradient buffer layouts.

The planner is the `paramlayout` program, installed with this package (`pip install .`
puts it on the environment's PATH). This package adds the Python ends of the workflow:

- `paramlayout.from_torch`: a torch module's trainable params -> a manifest;
- `paramlayout.megatron`: a layout -> the `full_param_layout` Megatron-LM's
  DistributedDataParallel takes.

Both need torch; importing `paramlayout` itself does not.
"""
import importlib.metadata
import os
import shutil
import subprocess
from pathlib import Path

try:
    __version__ = importlib.metadata.version("paramlayout")
except importlib.metadata.PackageNotFoundError:  # used from a source tree
    __version__ = "unknown"


def binary():
    """The path of the `paramlayout` program installed with this package (or, used from a
    source tree, the one on PATH). Raises FileNotFoundError when there is none."""
    try:
        files = importlib.metadata.files("paramlayout") or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if f.name == "paramlayout" and f.parent.name in ("bin", "Scripts"):
            path = str(Path(f.locate()).resolve())
            if os.access(path, os.X_OK):
                return path
    path = shutil.which("paramlayout")
    if path is None:
        raise FileNotFoundError("the paramlayout program is not installed with this package "
                                "nor on PATH: pip install the paramlayout project")
    return path


def run(*args, **kwargs):
    """Runs `paramlayout ARGS...` (subprocess.run's keyword arguments apply)."""
    return subprocess.run([binary(), *map(str, args)], **kwargs)
