"""The CLI tests' one harness. Every script here is run as `SCRIPT BINARY ROOT [EXTRA...]`
(tests/meson.build): the paramlayout program and the source tree, both made absolute, and
what follows. A script takes them, and `run`, from here, and ends with `main()`."""
import os
import subprocess
import sys
import unittest
from pathlib import Path

BINARY = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else ""
ROOT = Path(sys.argv[2]).resolve() if len(sys.argv) > 2 else Path()
EXTRA = sys.argv[3:]


def run(*args, cwd=None, stdin=None, env=None, timeout=300):
    """The program run with ARGS (each made a string), its output captured as text."""
    return subprocess.run([BINARY, *map(str, args)], cwd=cwd, input=stdin, env=env,
                          capture_output=True, text=True, errors="replace", timeout=timeout)


def main():
    """The calling script's tests, each named as it runs."""
    unittest.main(module="__main__", argv=sys.argv[:1], verbosity=2)
