#!/usr/bin/env python3
"""The pre-commit hook of .pre-commit-hooks.yaml, run as pre-commit runs a `language: system`
hook: its entry split as a shell splits it, then its `args`, from the repository's root,
with the built paramlayout on PATH. A repository that commits two jobs: both hold; a config
revision makes the hook fail naming it; `args` narrow it to one job.

Usage: precommit_hook_tests.py PARAMLAYOUT SOURCE_ROOT
"""
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import unittest
from pathlib import Path

from harness import BINARY, ROOT, main


ARGS = ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--bf16",
        "--use-distributed-optimizer", "--seq-length", "4096"]


def read_hooks(text):
    """The hooks of a .pre-commit-hooks.yaml: a list of flat mappings (`- id: ...` starts one;
    `key: value` lines; `>-` folds the indented lines after it into one line)."""
    hooks, key = [], None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.startswith("    ") and key:  # a folded value's next line
            hooks[-1][key] = (hooks[-1][key] + " " + line.strip()).strip()
            continue
        if line.startswith("- "):
            hooks.append({})
            line = line[2:]
        name, _, value = line.strip().partition(":")
        value = value.strip()
        key = name if value == ">-" else None
        hooks[-1][name] = {"true": True, "false": False, ">-": ""}.get(value, value)
    return hooks


class PreCommitHook(unittest.TestCase):
    def setUp(self):
        hooks = read_hooks((ROOT / ".pre-commit-hooks.yaml").read_text())
        self.assertEqual([h["id"] for h in hooks], ["paramlayout-check-jobs"])
        self.hook = hooks[0]
        self.assertEqual(self.hook["language"], "system")
        self.tmp = tempfile.TemporaryDirectory()
        self.repo = Path(self.tmp.name, "repo")
        (self.repo / "configs").mkdir(parents=True)
        for name in ("llama3.2-1b", "qwen2.5-3b"):
            shutil.copy(ROOT / f"testdata/configs/{name}.json", self.repo / "configs")
            planned = self.run_in_repo(
                [BINARY, "job", "--world-size", "16", "--hf-config", f"configs/{name}.json",
                 "-q", "-o", f"layouts/{name}", "--", *ARGS])
            self.assertEqual(planned.returncode, 0, planned.stderr)
        self.run_in_repo(["git", "init", "-q"])
        self.run_in_repo(["git", "add", "."])
        self.env = dict(os.environ, PATH=f"{Path(BINARY).parent}:{os.environ['PATH']}")

    def tearDown(self):
        self.tmp.cleanup()

    def run_in_repo(self, command, env=None):
        return subprocess.run(command, cwd=self.repo, capture_output=True, text=True, env=env,
                              timeout=300)

    def run_hook(self, args=()):
        command = shlex.split(self.hook["entry"]) + list(self.hook.get("args", [])) + list(args)
        # pass_filenames: false, so pre-commit appends no file names.
        self.assertFalse(self.hook["pass_filenames"])
        return self.run_in_repo(command, env=self.env)

    def test_committed_jobs_hold(self):
        result = self.run_hook()
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("layouts/llama3.2-1b/job.json: holds: 2 chunks", result.stdout)
        self.assertIn("layouts/qwen2.5-3b/job.json: holds: 2 chunks", result.stdout)

    def test_a_config_revision_fails_naming_the_job(self):
        config = self.repo / "configs/qwen2.5-3b.json"
        revised = json.loads(config.read_text())
        revised["num_hidden_layers"] += 2
        config.write_text(json.dumps(revised))
        result = self.run_hook()
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("configs/qwen2.5-3b.json changed since the job was planned", result.stdout)
        self.assertIn("layouts/qwen2.5-3b/job.json: broken", result.stdout)
        self.assertIn("layouts/llama3.2-1b/job.json: holds", result.stdout)

    def test_args_name_the_jobs_to_check(self):
        result = self.run_hook(["layouts/llama3.2-1b"])
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertNotIn("qwen2.5", result.stdout)

    def test_untracked_jobs_are_not_checked(self):
        self.run_in_repo(["git", "rm", "-q", "--cached", "-r", "layouts/qwen2.5-3b"])
        result = self.run_hook()
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertNotIn("qwen2.5", result.stdout)


if __name__ == "__main__":
    main()
