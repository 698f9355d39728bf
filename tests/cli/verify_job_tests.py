#!/usr/bin/env python3
"""CLI tests of `paramlayout verify JOB` on the cpu backend: every chunk of a small job (pp 2 x
vpp 2), a mixture-of-experts job whose expert dp differs from its dp, --stage and --chunk,
a chunk whose file is not the one job.json names (refused, exit 2) and a chunk that is wrong
with job.json's hash updated (verify's own verdict, exit 1, naming the chunk), fuzz.py's
layout mutations as a job's chunk, the --report JSON, and the usage errors of the two forms.

The figures the tests hold the output to come from the job's own files (each chunk layout's
buffers) and from hand calculations of dp and expert dp, never from verify's output.

Usage: verify_job_tests.py PARAMLAYOUT SOURCE_ROOT
"""
import hashlib
import json
import random
import re
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

from harness import main, run


SMALL = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
         "--vocab-size", "1000", "--max-position-embeddings", "64", "--bf16",
         "--use-distributed-optimizer", "--pipeline-model-parallel-size", "2",
         "--num-layers-per-virtual-pipeline-stage", "1", "--ddp-bucket-size", "20000"]
# 8 GPUs over pp 2: dp 4. Experts: ep 2 x etp 1 out of dp 4 x tp 1 leaves expert dp 2.
MOE = SMALL + ["--num-experts", "4", "--expert-model-parallel-size", "2",
               "--disable-bias-linear"]
CHUNKS = ["stage0.chunk0", "stage0.chunk1", "stage1.chunk0", "stage1.chunk1"]


def make_job(out_dir, world, args):
    result = run("job", "--world-size", world, "-o", out_dir, "-q", "--", *args)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(Path(out_dir, "job.json").read_text())


def numel(job_dir, chunk):
    layout = json.loads(Path(job_dir, chunk["layout"]).read_text())
    return sum(b["numel"] for b in layout["buffers"])


def rows(stdout):
    """The table's chunk rows: name -> the columns after it."""
    table = {}
    for line in stdout.splitlines():
        m = re.match(r"\s+(stage\d+\.chunk\d+|total)\s+(.*)$", line)
        if m:
            table[m.group(1)] = m.group(2).split()
    return table


def rewrite_layout(job_dir, name, change, update_hash):
    """Applies `change` to a chunk's layout; records its new SHA-256 in job.json if asked."""
    job_json = Path(job_dir, "job.json")
    job = json.loads(job_json.read_text())
    chunk = next(c for c in job["chunks"] if f"stage{c['stage']}.chunk{c['chunk']}" == name)
    path = Path(job_dir, chunk["layout"])
    layout = json.loads(path.read_text())
    change(layout)
    text = json.dumps(layout, indent=1)
    path.write_text(text)
    if update_hash:
        old = chunk["layout_sha256"]
        new = hashlib.sha256(text.encode()).hexdigest()
        job_json.write_text(job_json.read_text().replace(old, new))
    return chunk


def shift_a_param(layout):
    """The check's mutation of a single layout: a param moved one element on."""
    param = layout["buffers"][0]["params"][1]
    param["start"] += 1
    param["end"] += 1
    return param["name"]


class DenseJob(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = Path(cls.tmp.name, "job")
        cls.job = make_job(cls.dir, 8, SMALL)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_every_chunk_verified_at_its_dp(self):
        self.assertEqual((self.job["dp"], self.job["vpp"]), (4, 2))
        for form in (self.dir, self.dir / "job.json"):
            with self.subTest(form=form):
                result = run("verify", form, "--backend", "cpu")
                self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
                self.assertIn("4 of 4 chunks, data pass on cpu, 2 simulated devices",
                              result.stdout)
                table = rows(result.stdout)
                self.assertEqual(sorted(table), sorted(CHUNKS + ["total"]))
                total = 0
                for c in self.job["chunks"]:
                    row = table[f"stage{c['stage']}.chunk{c['chunk']}"]
                    # dp, expert dp, buffers, buckets, elements, #wrong
                    self.assertEqual(row[0:2], ["4", "4"])
                    self.assertEqual(int(row[4].replace(",", "")), numel(self.dir, c))
                    self.assertEqual(row[5], "0")
                    total += numel(self.dir, c)
                self.assertEqual(int(table["total"][2].replace(",", "")), total)
                self.assertRegex(result.stdout.splitlines()[-1],
                                 rf"job\.json: verified: 4 chunks, \d+ buckets, "
                                 rf"{total:,} elements, every element where it belongs")

    def test_stage_and_chunk_select(self):
        for args, expected in [
            (["--stage", "1"], ["stage1.chunk0", "stage1.chunk1"]),
            (["--chunk", "1"], ["stage0.chunk1", "stage1.chunk1"]),
            (["--stage", "0", "--chunk", "1"], ["stage0.chunk1"]),
        ]:
            with self.subTest(args):
                result = run("verify", self.dir, "--backend", "cpu", *args)
                self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
                self.assertEqual(sorted(rows(result.stdout)), expected + ["total"])
                self.assertIn(f"{len(expected)} of 4 chunks", result.stdout)

    def test_selection_outside_the_job(self):
        for args, message in [
            (["--stage", "2"], "--stage 2: " + str(self.dir / "job.json") + " has stages 0 to 1"),
            (["--chunk", "5"], "has chunks 0 to 1 in each stage"),
            (["--stage", "-1"], "--stage"),
        ]:
            with self.subTest(args):
                result = run("verify", self.dir, "--backend", "cpu", *args)
                self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
                self.assertIn(message, result.stderr)
                self.assertEqual(result.stdout, "")

    def test_report_json(self):
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp, "report.json")
            result = run("verify", self.dir, "--backend", "cpu", "--gpus", "4",
                         "--chunk-elements", "1000", "--chunk", "0", "--report", report, "-q")
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            self.assertEqual(result.stdout, f"{self.dir / 'job.json'}: verified (2 chunks)\n")
            j = json.loads(report.read_text())
            for key in ("job", "ok", "chunks_verified", "failed", "elements", "mismatches",
                        "seconds", "chunks"):
                self.assertIn(key, j)
            self.assertEqual((j["ok"], j["chunks_verified"], j["failed"], j["mismatches"]),
                             (True, 2, [], 0))
            selected = [c for c in self.job["chunks"] if c["chunk"] == 0]
            self.assertEqual([(c["stage"], c["chunk"], c["name"]) for c in j["chunks"]],
                             [(c["stage"], 0, f"stage{c['stage']}.chunk0") for c in selected])
            self.assertEqual(j["elements"], sum(numel(self.dir, c) for c in selected))
            for c, recorded in zip(j["chunks"], selected):
                # The single layout's report object, with the chunk's place and dp.
                for key in ("ok", "backend", "devices", "seconds", "notes", "violations",
                            "mismatches", "first_mismatches", "buckets", "dp", "expert_dp"):
                    self.assertIn(key, c)
                self.assertEqual((c["dp"], c["expert_dp"], c["devices"]), (4, 4, 4))
                self.assertEqual(sum(b["elements"] for b in c["buckets"]),
                                 numel(self.dir, recorded))
                self.assertTrue(all(b["ranks"] == 4 for b in c["buckets"]))
                self.assertTrue(any(b["chunks"] > 1 for b in c["buckets"]))

    def test_usage(self):
        layout = self.dir / self.job["chunks"][0]["layout"]
        manifest = self.dir / self.job["chunks"][0]["manifest"]
        for args, message in [
            ([self.dir, "--manifest", manifest], "is a job, whose chunks name their own manifests"),
            ([layout], "--manifest is required: " + str(layout) + " is a layout, not a job"),
            ([layout, "--manifest", manifest, "--stage", "0"],
             "--stage: " + str(layout) + " is a layout; only a job has stages"),
            ([Path(self.tmp.name)], "not a job directory: it holds no job.json"),
            ([Path(self.tmp.name, "missing.json")], "missing.json: cannot open"),
        ]:
            with self.subTest(message):
                result = run("verify", *args, "--backend", "cpu")
                self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
                self.assertIn(message, result.stderr)
        # The single-layout form as before.
        result = run("verify", layout, "--manifest", manifest, "--backend", "cpu")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn(": verified: ", result.stdout)


class MixtureOfExpertsJob(unittest.TestCase):
    def test_each_buffer_over_its_own_ranks(self):
        with tempfile.TemporaryDirectory() as tmp:
            job_dir = Path(tmp, "moe")
            job = make_job(job_dir, 8, MOE)
            self.assertEqual((job["dp"], job["expert_dp"]), (4, 2))
            report = Path(tmp, "report.json")
            result = run("verify", job_dir, "--backend", "cpu", "--gpus", "4", "--report", report)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            table = rows(result.stdout)
            for name in CHUNKS:
                self.assertEqual(table[name][0:2], ["4", "2"])
            j = json.loads(report.read_text())
            self.assertTrue(j["ok"])
            expert_buckets = 0
            files = {f"stage{c['stage']}.chunk{c['chunk']}": c["layout"] for c in job["chunks"]}
            for c in j["chunks"]:
                layout = json.loads(Path(job_dir, files[c["name"]]).read_text())
                for b in c["buckets"]:
                    expert = layout["buffers"][b["buffer"]]["expert_parallel"]
                    # expert dp = 8 / (pp 2 x ep 2 x etp 1) = 2; dp = 8 / pp 2 = 4
                    self.assertEqual(b["ranks"], 2 if expert else 4)
                    # gcd(ranks, 4 simulated devices)
                    self.assertEqual(b["devices"], 2 if expert else 4)
                    expert_buckets += expert
            self.assertGreater(expert_buckets, 0)


class BrokenChunk(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self.tmp.name, "job")
        make_job(self.dir, 8, SMALL)

    def tearDown(self):
        self.tmp.cleanup()

    def test_a_chunk_file_not_the_one_job_json_names(self):
        rewrite_layout(self.dir, "stage1.chunk0", shift_a_param, update_hash=False)
        result = run("verify", self.dir, "--backend", "cpu")
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertIn("stage1.chunk0: stage1.chunk0.layout.json is not the file job.json names",
                      result.stderr)
        self.assertEqual(result.stdout, "")

    def test_a_wrong_chunk_is_named(self):
        moved = []
        rewrite_layout(self.dir, "stage1.chunk0", lambda l: moved.append(shift_a_param(l)),
                       update_hash=True)
        report = Path(self.tmp.name, "report.json")
        result = run("verify", self.dir, "--backend", "cpu", "--report", report)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn(f'job.json: stage1.chunk0: buffer 0', result.stdout)
        self.assertIn(f'param "{moved[0]}"', result.stdout)
        self.assertEqual(rows(result.stdout)["stage1.chunk0"][5], "broken")
        self.assertRegex(result.stdout.splitlines()[-1],
                         r"job\.json: wrong: stage1\.chunk0 \(\d+ problems?, no data pass\); "
                         r"3 of 4 chunks verified$")
        j = json.loads(report.read_text())
        self.assertEqual((j["ok"], j["failed"]), (False, ["stage1.chunk0"]))
        self.assertEqual([c["ok"] for c in j["chunks"]], [True, True, False, True])
        quiet = run("verify", self.dir, "--backend", "cpu", "-q")
        self.assertEqual((quiet.returncode, quiet.stdout),
                         (1, f"{self.dir / 'job.json'}: wrong: stage1.chunk0\n"))
        # The other chunks alone are still verified.
        self.assertEqual(run("verify", self.dir, "--backend", "cpu", "--stage", "0").returncode, 0)


class MutatedChunks(unittest.TestCase):
    """fuzz.py's mutations of a layout, put into a job as one of its chunks with job.json's
    hash updated: verify JOB exits 0, 1 or 2, never crashes, and names the chunk when it
    is not 0."""
    CASES = 40

    def test_mutated_chunks(self):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from fuzz import SANITIZER_MARKS, Mutator
        rng = random.Random("verify-job")
        with tempfile.TemporaryDirectory() as tmp:
            pristine = Path(tmp, "pristine")
            job = make_job(pristine, 8, MOE)
            codes = {}
            for case in range(self.CASES):
                job_dir = Path(tmp, f"case-{case}")
                shutil.copytree(pristine, job_dir)
                chunk = rng.choice(job["chunks"])
                name = f"stage{chunk['stage']}.chunk{chunk['chunk']}"
                layout = job_dir / chunk["layout"]
                data = Mutator(rng).mutate(json.loads(layout.read_text()), layout=True)
                layout.write_bytes(data)
                record = job_dir / "job.json"
                record.write_text(record.read_text().replace(
                    chunk["layout_sha256"], hashlib.sha256(data).hexdigest()))
                result = run("verify", job_dir, "--backend", "cpu", "-q", "--max-elements",
                             1 << 22)
                with self.subTest(case=case, chunk=name):
                    out = result.stdout + result.stderr
                    self.assertIn(result.returncode, (0, 1, 2), out)
                    self.assertFalse([m for m in SANITIZER_MARKS if m in out], out)
                    if result.returncode == 1:
                        self.assertEqual(result.stdout,
                                         f"{job_dir / 'job.json'}: wrong: {name}\n")
                    elif result.returncode == 2:
                        self.assertIn(f"paramlayout: error: {name}: ", result.stderr)
                        self.assertEqual(result.stdout, "")
                codes[result.returncode] = codes.get(result.returncode, 0) + 1
                shutil.rmtree(job_dir)
            # Most mutations break the chunk; some are caught by the reader, some by verify.
            self.assertGreater(codes.get(1, 0), 0, codes)
            self.assertGreater(codes.get(2, 0), 0, codes)


if __name__ == "__main__":
    main()
