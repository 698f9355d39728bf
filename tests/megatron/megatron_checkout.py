"""A Megatron-LM checkout (a work tree, or a bare git directory such as the one `fetch`
makes), read without checking anything out: the source of a file at HEAD, and HEAD's commit.
"""
import os
import subprocess
from pathlib import Path

SKIP_MESSAGE = "skipped: set MEGATRON_LM to a Megatron-LM checkout (work tree or bare git dir)"


def checkout_from(argument):
    """The checkout ARGUMENT names; for "-", $MEGATRON_LM's, or None where that is unset or
    missing (the caller skips)."""
    if argument != "-":
        return argument
    checkout = os.environ.get("MEGATRON_LM", "")
    return checkout if checkout and Path(checkout).exists() else None


def read_source(checkout, path):
    """The text of PATH in CHECKOUT: the work tree's file, or HEAD's in a bare directory."""
    root = Path(checkout)
    if (root / path).exists():
        return (root / path).read_text()
    return subprocess.run(["git", "--git-dir", str(root), "show", f"HEAD:{path}"],
                          capture_output=True, text=True, check=True).stdout


def checkout_commit(checkout):
    """HEAD's commit in CHECKOUT, or "unknown"."""
    root = Path(checkout)
    git = ["git", "-C", str(root)] if (root / ".git").exists() else ["git", "--git-dir", str(root)]
    result = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True)
    return result.stdout.strip() or "unknown"
