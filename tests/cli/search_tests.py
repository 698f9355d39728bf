#!/usr/bin/env python3
"""CLI tests of `paramlayout search`: every candidate's memory is what `job` gives for its
launch line (a sample replanned), candidates respect Megatron-LM's divisibility rules, sizes
the line fixes stay fixed, the top launches written as jobs, and bad input refused.

Usage: search_tests.py PARAMLAYOUT SOURCE_ROOT
"""
import json
import tempfile
import unittest
from pathlib import Path

from harness import ROOT, main, run

LINE = ["--bf16", "--micro-batch-size", "1", "--global-batch-size", "64", "--seq-length", "2048",
        "--use-distributed-optimizer"]


def search(*options, line=LINE, world=16, config="llama3.2-1b.json"):
    result = run("search", "--world-size", world, "--hf-config", ROOT / "testdata/configs" / config,
                 "--json", *options, "--", *line)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


class Candidates(unittest.TestCase):
    def assert_figures_are_jobs(self, candidates, config, world=16):
        """A sample across `candidates`, each replanned with `job`: its peak and persistent
        bytes must be job.json's heaviest stage's."""
        self.assertGreater(len(candidates), 10)
        for c in candidates[:: max(1, len(candidates) // 8)]:
            with tempfile.TemporaryDirectory() as tmp:
                result = run("job", "--world-size", world, "--hf-config",
                             ROOT / "testdata/configs" / config, "-o", Path(tmp) / "j",
                             "-q", "--", *c["args"])
                self.assertEqual(result.returncode, 0, result.stderr)
                stages = json.loads((Path(tmp) / "j/job.json").read_text())["memory"]["stages"]
                heaviest = max(stages, key=lambda s: s["peak_bytes"])
                self.assertEqual(c["peak_bytes"], heaviest["peak_bytes"], c["args"])
                self.assertEqual(c["persistent_bytes"], heaviest["persistent_bytes"], c["args"])

    def test_each_figure_is_jobs(self):
        self.assert_figures_are_jobs(search("--gpu-memory", "H100")["candidates"],
                                     "llama3.2-1b.json")

    def test_moe_figures_are_jobs(self):
        line = LINE + ["--moe-grouped-gemm"]
        candidates = search(line=line, config="qwen3-30b-a3b.json")["candidates"]
        self.assertGreater(len({c["ep"] for c in candidates}), 2)
        # MoE under tensor parallelism only with sequence parallelism (moe_layer.py:636).
        self.assertTrue(all(c["sequence_parallel"] for c in candidates if c["tp"] > 1))
        self.assert_figures_are_jobs(candidates, "qwen3-30b-a3b.json")

    def test_optimizer_instances_varied(self):
        candidates = search("--vary", "optimizer-instances")["candidates"]
        counts = {c["optimizer_instances"] for c in candidates}
        self.assertGreater(len(counts), 2)
        for c in candidates:
            self.assertEqual(c["dp"] * c["cp"] % c["optimizer_instances"], 0)
        self.assertEqual({c["optimizer_instances"] for c in search()["candidates"]}, {1})
        self.assert_figures_are_jobs(
            [c for c in candidates if c["optimizer_instances"] > 1], "llama3.2-1b.json")

    def test_sizes_divide_the_world(self):
        for c in search()["candidates"]:
            self.assertEqual(c["tp"] * c["pp"] * c["cp"] * c["dp"], 16)
            self.assertEqual(2048 % (2 * c["cp"]) if c["cp"] > 1 else 0, 0)
            self.assertEqual(64 % (c["dp"]), 0)  # the global batch over micro batch x dp

    def test_fits_first(self):
        found = search("--gpu-memory", "8")
        flags = [c["fits"] for c in found["candidates"]]
        self.assertEqual(flags, sorted(flags, reverse=True))

    def test_given_sizes_stay(self):
        found = search(line=LINE + ["--tensor-model-parallel-size", "2"])
        self.assertTrue(found["candidates"])
        self.assertEqual({c["tp"] for c in found["candidates"]}, {2})
        found = search("--fix", "pp,recompute")
        self.assertEqual({c["pp"] for c in found["candidates"]}, {1})
        self.assertEqual({c["recompute"] for c in found["candidates"]}, {"none"})

    def test_refusals_counted(self):
        found = search("--tp", "1,3")
        reasons = " ".join(r["example"] for r in found["rejected"])
        self.assertIn("not divisible", reasons)
        self.assertNotIn(3, {c["tp"] for c in found["candidates"]})

    def test_top_written_as_jobs(self):
        with tempfile.TemporaryDirectory() as tmp:
            result = run("search", "--world-size", 16, "--hf-config",
                         ROOT / "testdata/configs/llama3.2-1b.json", "--top", 2, "-o",
                         Path(tmp) / "top", "--", *LINE)
            self.assertEqual(result.returncode, 0, result.stderr)
            for n in (1, 2):
                self.assertTrue((Path(tmp) / "top" / str(n) / "job.json").is_file())
                check = run("check", Path(tmp) / "top" / str(n), "--replan")
                self.assertEqual(check.returncode, 0, check.stdout + check.stderr)


class BadInput(unittest.TestCase):
    def test_refused(self):
        cases = [(["--fix", "bogus"], LINE, "--fix"),
                 ([], ["--bf16"], "--seq-length"),
                 ([], LINE + ["--no-such-argument"], "no-such-argument")]
        for options, line, said in cases:
            result = run("search", "--world-size", 16, "--hf-config",
                         ROOT / "testdata/configs/llama3.2-1b.json", *options, "--", *line)
            self.assertEqual(result.returncode, 2, result.stdout)
            self.assertIn(said, result.stderr)
            self.assertEqual(result.stdout, "")


if __name__ == "__main__":
    main()
