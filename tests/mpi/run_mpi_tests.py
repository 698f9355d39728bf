#!/usr/bin/env python3
"""MPI tests: the Peers under `mpirun -np 3`, and `paramlayout verify` (a layout, a job)
started as several processes: every process agrees on each failure and on a job's chunks,
exits alike, and rank 0 alone prints.

Usage: run_mpi_tests.py MPIRUN PEERS_TEST PARAMLAYOUT SOURCE_ROOT
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

MPIRUN = PEERS_TEST = BINARY = ""
ROOT = Path()
# Root in CI containers; two cores, so oversubscribe; Open MPI's own allocations are not
# ours to report in the sanitizer build.
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           ASAN_OPTIONS="detect_leaks=0")


def mpirun(processes, *command):
    return subprocess.run([MPIRUN, "-np", str(processes), "--oversubscribe", *map(str, command)],
                          capture_output=True, text=True, errors="replace", timeout=120, env=ENV)


def has_gpu():
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0 \
        if any(Path(p, "nvidia-smi").exists() for p in os.environ["PATH"].split(":")) else False


class Peers(unittest.TestCase):
    def test_peers_agree_and_combine(self):
        result = mpirun(3, PEERS_TEST)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)


class VerifyUnderMpi(unittest.TestCase):
    MANIFEST = ROOT / "testdata/manifests/llama3-8b.json"

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.layout = Path(cls.tmp.name, "layout.json")
        plan = subprocess.run([BINARY, "plan", cls.MANIFEST, "--dp", "4", "-q", "-o", cls.layout],
                              capture_output=True, text=True)
        assert plan.returncode == 0, plan.stderr

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def verify(self, *args, layout=None):
        return mpirun(2, BINARY, "verify", layout or self.layout, "--manifest", self.MANIFEST,
                      *args)

    def assert_said_once(self, result, text):
        self.assertEqual((result.stdout + result.stderr).count(text), 1,
                         result.stdout + result.stderr)

    def test_cpu_backend_refuses_several_processes(self):
        result = self.verify("--backend", "cpu")
        self.assertEqual(result.returncode, 2)
        self.assert_said_once(result, "the cpu backend runs in one process, but 2 were launched")

    def test_no_gpu_fails_every_process_alike(self):
        if has_gpu():
            self.skipTest("a GPU is visible")
        for backend in ("nccl", "auto"):
            with self.subTest(backend):
                result = self.verify("--backend", backend)
                self.assertEqual(result.returncode, 2)
                self.assert_said_once(result, "no CUDA device was found")
                self.assertNotIn("using the cpu backend", result.stderr)

    def test_unreadable_input_is_reported_once(self):
        result = self.verify(layout=Path(self.tmp.name, "missing.json"))
        self.assertEqual(result.returncode, 2)
        self.assert_said_once(result, "missing.json")

    def test_broken_layout_is_wrong_on_every_process(self):
        layout = json.loads(self.layout.read_text())
        layout["buffers"][0]["params"][0]["start"] += 1
        broken = Path(self.tmp.name, "broken.json")
        broken.write_text(json.dumps(layout))
        result = self.verify(layout=broken)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assert_said_once(result, "no data pass")



class VerifyJobUnderMpi(unittest.TestCase):
    """verify JOB under mpirun: the processes agree on the chunks, fail alike, and rank 0
    alone prints."""
    ARGS = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
            "--vocab-size", "1000", "--max-position-embeddings", "64", "--bf16",
            "--use-distributed-optimizer", "--pipeline-model-parallel-size", "2"]

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = Path(cls.tmp.name, "job")
        job = subprocess.run([BINARY, "job", "--world-size", "8", "-o", cls.dir, "-q", "--",
                              *cls.ARGS], capture_output=True, text=True)
        assert job.returncode == 0, job.stderr
        # stage1.chunk0 broken (a param moved one element on), job.json's hash updated.
        record = cls.dir / "job.json"
        chunk = json.loads(record.read_text())["chunks"][1]
        path = cls.dir / chunk["layout"]
        layout = json.loads(path.read_text())
        layout["buffers"][0]["params"][0]["start"] += 1
        text = json.dumps(layout)
        path.write_text(text)
        record.write_text(record.read_text().replace(
            chunk["layout_sha256"], hashlib.sha256(text.encode()).hexdigest()))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def assert_said_once(self, result, text):
        self.assertEqual((result.stdout + result.stderr).count(text), 1,
                         result.stdout + result.stderr)

    def test_no_gpu_fails_every_process_alike(self):
        if has_gpu():
            self.skipTest("a GPU is visible")
        result = mpirun(2, BINARY, "verify", self.dir, "--stage", "0")
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assert_said_once(result, "stage0.chunk0: no CUDA device was found")

    def test_broken_chunk_is_wrong_on_every_process(self):
        result = mpirun(2, BINARY, "verify", self.dir, "--stage", "1", "--backend", "nccl")
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assert_said_once(result, "wrong: stage1.chunk0 (")

    def test_processes_that_select_other_chunks_are_refused(self):
        command = [BINARY, "verify", self.dir, "--backend", "nccl", "--stage"]
        result = subprocess.run(
            [MPIRUN, "--oversubscribe", "-np", "1", *map(str, command), "0", ":", "-np", "1",
             *map(str, command), "1"],
            capture_output=True, text=True, errors="replace", timeout=120, env=ENV)
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assert_said_once(result, "the 2 processes do not find the same chunks")

    def test_a_chunk_not_as_recorded_is_reported_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp, "job")
            shutil.copytree(self.dir, copy)
            path = copy / json.loads((copy / "job.json").read_text())["chunks"][0]["layout"]
            path.write_text(path.read_text() + " ")
            result = mpirun(2, BINARY, "verify", copy)
            self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
            self.assert_said_once(result, "is not the file job.json names")


if __name__ == "__main__":
    MPIRUN, PEERS_TEST, BINARY, root = sys.argv[1:5]
    ROOT = Path(root)
    VerifyUnderMpi.MANIFEST = ROOT / "testdata/manifests/llama3-8b.json"
    unittest.main(argv=sys.argv[:1], verbosity=2)
