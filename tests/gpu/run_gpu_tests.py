#!/usr/bin/env python3
"""GPU tests: the nccl backend of `paramlayout verify` on real devices.

Exits 77 (meson's "skipped") with the reason where no CUDA device was found (or the build
has no nccl backend); any other failure of the first verify (a CUDA or NCCL error, a
timeout) fails the tests.
Usage: run_gpu_tests.py PARAMLAYOUT SOURCE_ROOT
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

BINARY = ""
ROOT = Path()


def run(*args):
    return subprocess.run([BINARY, *map(str, args)], capture_output=True, text=True,
                          errors="replace", timeout=300)


def plan(tmp, manifest, *args):
    out = Path(tmp, f"layout-{len(os.listdir(tmp))}.json")
    result = run("plan", manifest, "-q", "-o", out, *args)
    assert result.returncode == 0, result.stderr
    return out


NO_DEVICE = "no CUDA device was found"


def visible_gpus():
    """The number of GPUs the nccl backend sees; exits 77 where no CUDA device was found,
    1 where the first verify fails otherwise."""
    with tempfile.TemporaryDirectory() as tmp:
        m = ROOT / "testdata/reference/manifests/random-1001.json"
        report = Path(tmp, "r.json")
        result = run("verify", plan(tmp, m, "--dp", "2"), "--manifest", m, "--backend", "nccl",
                     "-q", "--report", report)
        if result.returncode == 2 and NO_DEVICE in result.stderr:
            print(f"SKIP: no GPU to test the nccl backend on: {result.stderr.strip()}")
            sys.exit(77)
        if result.returncode != 0 or not report.exists():
            print(f"FAIL: the first nccl verify exited {result.returncode}:\n"
                  f"{result.stdout}{result.stderr}".rstrip())
            sys.exit(1)
        return json.loads(report.read_text())["devices"]


class NcclVerify(unittest.TestCase):
    GPUS = 1

    def verify(self, layout, manifest, *args):
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp, "report.json")
            result = run("verify", layout, "--manifest", manifest, "--backend", "nccl",
                         "--report", report, *args)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            return json.loads(report.read_text())

    def test_reference_layouts(self):
        ref = ROOT / "testdata/reference"
        cases = json.loads((ref / "cases.json").read_text())
        with tempfile.TemporaryDirectory() as tmp:
            for case in cases[::6]:
                with self.subTest(case["id"]):
                    o = case["options"]
                    args = ["--dp", o["dp"], "--strategy", o["strategy"]]
                    if "expert_dp" in o:
                        args += ["--expert-dp", o["expert_dp"]]
                    if o["grad_reduce_in_fp32"]:
                        args.append("--grad-reduce-in-fp32")
                    layout = plan(tmp, ref / case["manifest"], *args)
                    j = self.verify(layout, ref / case["manifest"])
                    self.assertTrue(j["ok"])
                    self.assertTrue(j["backend"].startswith("nccl"))
                    numel = sum(b["numel"] for b in json.loads(layout.read_text())["buffers"])
                    self.assertEqual(sum(b["elements"] for b in j["buckets"]), numel)

    def test_many_ranks_per_gpu_and_chunks(self):
        m = ROOT / "testdata/manifests/llama3-8b.json"
        with tempfile.TemporaryDirectory() as tmp:
            for dp in (1, 64, 512):
                for strategy in ("sequential-dp", "layerwise"):
                    with self.subTest(dp=dp, strategy=strategy):
                        layout = plan(tmp, m, "--dp", dp, "--strategy", strategy)
                        j = self.verify(layout, m, "--chunk-elements", 3_000_000)
                        self.assertTrue(j["ok"])
                        self.assertTrue(any(b["chunks"] > 1 for b in j["buckets"]))
                        self.assertTrue(all(b["filled_bytes"] > 0 for b in j["buckets"]))

    def test_each_gpu_count(self):
        m = ROOT / "testdata/reference/manifests/gpt2-124m.json"
        with tempfile.TemporaryDirectory() as tmp:
            layout = plan(tmp, m, "--dp", "16", "--grad-reduce-in-fp32")
            for gpus in sorted({1, 2, self.GPUS} & set(range(1, self.GPUS + 1))):
                with self.subTest(gpus=gpus):
                    j = self.verify(layout, m, "--gpus", gpus)
                    self.assertEqual(j["devices"], gpus)
                    self.assertTrue(j["ok"])

    def test_one_process_per_gpu_under_mpirun(self):
        mpirun = shutil.which("mpirun")
        if self.GPUS < 2 or not mpirun or "mpi" not in run("--version").stdout:
            self.skipTest("needs 2 GPUs, mpirun and a build with MPI")
        m = ROOT / "testdata/reference/manifests/gpt2-124m.json"
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        with tempfile.TemporaryDirectory() as tmp:
            layout = plan(tmp, m, "--dp", "16", "--strategy", "layerwise")
            alone = self.verify(layout, m)
            report = Path(tmp, "mpi.json")
            result = subprocess.run(
                [mpirun, "-np", str(self.GPUS), BINARY, "verify", layout, "--manifest", m,
                 "--backend", "nccl", "--report", report],
                capture_output=True, text=True, errors="replace", timeout=300, env=env)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            self.assertEqual(result.stdout.count("verified:"), 1, "rank 0 alone reports")
            j = json.loads(report.read_text())
            self.assertIn("over MPI", j["backend"])
            self.assertEqual(j["devices"], self.GPUS)
            self.assertTrue(j["ok"])
            self.assertEqual([b["elements"] for b in j["buckets"]],
                             [b["elements"] for b in alone["buckets"]])

    def test_a_job_chunk_after_chunk_on_one_backend(self):
        # pp 2 x vpp 2 on 8 GPUs: dp 4; 4 experts over ep 2: expert dp 2. One backend started
        # for the first chunk verifies the others, whatever their dp.
        args = ["--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
                "--vocab-size", "5000", "--max-position-embeddings", "64", "--bf16",
                "--use-distributed-optimizer", "--pipeline-model-parallel-size", "2",
                "--num-layers-per-virtual-pipeline-stage", "1", "--num-experts", "4",
                "--expert-model-parallel-size", "2", "--disable-bias-linear"]
        with tempfile.TemporaryDirectory() as tmp:
            job_dir = Path(tmp, "job")
            job = run("job", "--world-size", "8", "-q", "-o", job_dir, "--", *args)
            self.assertEqual(job.returncode, 0, job.stderr)
            chunks = json.loads((job_dir / "job.json").read_text())["chunks"]
            report = Path(tmp, "report.json")
            result = run("verify", job_dir, "--backend", "nccl", "--report", report)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            j = json.loads(report.read_text())
            self.assertEqual((j["ok"], j["chunks_verified"]), (True, len(chunks)))
            for c, recorded in zip(j["chunks"], chunks):
                self.assertTrue(c["backend"].startswith("nccl"))
                self.assertEqual((c["dp"], c["expert_dp"]), (4, 2))
                layout = json.loads((job_dir / recorded["layout"]).read_text())
                self.assertEqual(sum(b["elements"] for b in c["buckets"]),
                                 sum(b["numel"] for b in layout["buffers"]))

    def test_timeout_aborts_instead_of_waiting(self):
        # A 1 GB reduce-scatter cannot finish within a microsecond: the communicators are
        # aborted and verify says so (exit 2), promptly.
        m = ROOT / "testdata/manifests/llama3-8b.json"
        with tempfile.TemporaryDirectory() as tmp:
            result = run("verify", plan(tmp, m, "--dp", "64"), "--manifest", m, "--backend",
                         "nccl", "--timeout", "0.000001")
            self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
            self.assertIn("did not finish within", result.stderr)
            self.assertIn("the NCCL communicators were aborted", result.stderr)

    def test_more_gpus_than_visible_exits_2(self):
        m = ROOT / "testdata/reference/manifests/random-1001.json"
        with tempfile.TemporaryDirectory() as tmp:
            result = run("verify", plan(tmp, m, "--dp", "8"), "--manifest", m, "--backend",
                         "nccl", "--gpus", self.GPUS + 1)
            self.assertEqual(result.returncode, 2)
            self.assertIn("asks for more GPUs than the", result.stderr)


if __name__ == "__main__":
    BINARY = os.path.abspath(sys.argv[1])
    ROOT = Path(sys.argv[2]).resolve()
    gpus = visible_gpus()
    NcclVerify.GPUS = gpus
    print(f"nccl backend on {gpus} GPU(s)")
    unittest.main(argv=[sys.argv[0], "-v"])
