#!/usr/bin/env python3
"""CLI tests of `check JOB --against-log`: a start-up log Megatron-LM's own code wrote
(testdata/logs/megatron-start-up.log) agrees with the job for its line, as torchrun, srun and
mpirun prefix it, with its ranks' lines interleaved; each change to it is named; a log of
another launch or model is named as such; a log without a report and the usage errors exit 2.

Usage: check_log_tests.py PARAMLAYOUT SOURCE_ROOT
"""
import re
import tempfile
import unittest
from pathlib import Path

from harness import ROOT, main, run


# The line the log is of (tests/megatron/real_model_cases.py, LOG_MUTATION_CASE): 8 layers
# over 2 stages of 2 virtual chunks on 8 GPUs, buckets of 20,000 padded for NCCL's bus
# bandwidth. Made by: tests/megatron/real_model.py --binary build/paramlayout --world-size 8
# --write-log testdata/logs/megatron-start-up.log -- LINE
LINE = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
        "--max-position-embeddings", "128", "--vocab-size", "1000", "--num-layers", "8",
        "--pipeline-model-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "2",
        "--overlap-grad-reduce", "--ddp-bucket-size", "20000",
        "--ddp-pad-buckets-for-high-nccl-busbw", "--bf16", "--use-distributed-optimizer",
        "--micro-batch-size", "1", "--seq-length", "128"]


class AgainstLog(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.root = Path(cls.tmp.name)
        cls.log = (ROOT / "testdata/logs/megatron-start-up.log").read_text()
        for name, world in (("job", 8), ("wider", 16)):
            r = run("job", "--world-size", world, "-q", "-o", cls.root / name, "--", *LINE)
            assert r.returncode == 0, r.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check(self, text, job="job"):
        path = self.root / "start-up.log"
        path.write_text(text)
        return run("check", self.root / job, "--against-log", path)

    def lines(self):
        return self.log.splitlines()

    def test_megatrons_own_log_agrees(self):
        r = self.check(self.log)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # Two chunks a stage, one dense buffer each: 4 reports, and a param count per stage.
        self.assertIn("the log agrees: 4 bucket reports (4 of 4 buffers), 2 param counts",
                      r.stdout)

    def test_every_launchers_prefix(self):
        prefixed = {
            "srun -l": lambda rank, text: f"{rank}: {text}",
            "mpirun --tag-output": lambda rank, text: f"[1,{rank}]<stdout>:{text}",
            "torchrun --tee": lambda rank, text: f"[default{rank}]:{text}",
            # One process's own log: the logger's format on a message's first line only.
            "none": lambda rank, text: (
                f"[2026-12-07 10:00:00,123] [INFO] [megatron.core.distributed] {text}"
                if text.startswith("Number of buckets") else text),
        }
        for launcher, prefix in prefixed.items():
            with self.subTest(launcher):
                text = "\n".join(prefix(*re.match(r"\[rank(\d+)\]:(.*)", line).groups())
                                 for line in self.lines()) + "\n"
                r = self.check(text)
                self.assertEqual(r.returncode, 0, r.stdout)

    def test_ranks_interleaved(self):
        ranks = {}
        for line in self.lines():
            ranks.setdefault(line.split(":")[0], []).append(line)
        first, second = ranks.values()
        mixed = [line for pair in zip(first, second) for line in pair]
        shorter = min(len(first), len(second))
        mixed += first[shorter:] + second[shorter:]
        r = self.check("\n".join(mixed) + "\n")
        self.assertEqual(r.returncode, 0, r.stdout)

    def test_changes_are_named(self):
        lines = self.lines()
        padded = next(i for i, l in enumerate(lines) if "padded size" in l)
        grown = list(lines)
        grown[padded] = grown[padded].replace("65536 padded", "65600 padded")
        bucket2 = next(i for i, l in enumerate(lines) if "Params for bucket 2" in l)
        moved = list(lines)
        moved.insert(bucket2, moved.pop(bucket2 - 1))
        dtype = [l.replace("torch.float32", "torch.bfloat16", 1) if i == padded + 1 else l
                 for i, l in enumerate(lines)]
        counted = [re.sub(r": 273664$", ": 273665", l) for l in lines]
        for what, changed, named in (
                ("a padded size", grown, "bucket 1: padded size: log 65,600, job 65,536"),
                ("a param moved", moved, ": log bucket 2, job bucket 1"),
                ("a main-grad dtype", dtype, "main_grad dtype: log bfloat16, job float32"),
                ("a param count", counted, "start-up.log:1 rank 0: params on tensor-parallel "
                                           "rank 0: log 273,665, job 273,664")):
            with self.subTest(what):
                r = self.check("\n".join(changed) + "\n")
                self.assertEqual(r.returncode, 1, r.stdout)
                self.assertIn(named, r.stdout)

    def test_memory_reports_beside_the_jobs_figures(self):
        memory = ("[rank4]:[Rank 4] (after 2 iterations) memory (MB) | allocated: 5.25 | "
                  "max allocated: 9.50 | reserved: 12.00 | max reserved: 12.00\n")
        r = self.check(self.log + memory)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("memory: rank 4 (stage 1) after 2 iterations: allocated 5.25 MiB", r.stdout)
        self.assertIn("than the job's persistent", r.stdout)
        self.assertIn("max allocated 9.50 MiB against the job's peak", r.stdout)

    def test_another_launch_is_named_as_such(self):
        r = self.check(self.log, job="wider")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("the log is of another launch: rank 4 is on pipeline stage 1 in it", r.stdout)
        self.assertEqual(len(r.stdout.strip().splitlines()), 2, r.stdout)

    def test_a_log_without_a_report_or_cut_short(self):
        r = self.check("[rank0]: iteration 1 / 10 | loss 10.1\n")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no report of Megatron-LM's DDP found", r.stderr)
        self.assertEqual(r.stdout, "")
        r = self.check("\n".join(self.lines()[:4]) + "\n")
        self.assertEqual(r.returncode, 2)
        self.assertIn("start-up.log:2: the report announces 5 buckets and gives 1", r.stderr)

    def test_usage_errors(self):
        layout = next((self.root / "job").glob("*.layout.json"))
        r = run("check", layout, "--against-log", self.root / "none.log")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--against-log holds a job against its logs", r.stderr)
        r = run("check", self.root / "job", "--against-log", self.root / "none.log")
        self.assertEqual(r.returncode, 2)
        self.assertIn("none.log", r.stderr)
        r = run("check", self.root / "job", "--against-log", "-", stdin=self.log)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    main()
