#!/usr/bin/env python3
"""CLI tests of a job as the input of `check` and of `job --from`: the launch job.json records,
a replay that writes the same files, a tampered chunk, a figure job.json gets wrong, a chunk
file left from another job, a model revision and a world-size change caught by `check
--replan`, and the usage errors.

Usage: job_check_tests.py PARAMLAYOUT SOURCE_ROOT
"""
import hashlib
import json
import re
import shutil
import tempfile
import unittest
from pathlib import Path

from harness import ROOT, main, run


# Llama 3 8B on 64 GPUs: tp 4, pp 2, so dp 8 and two chunks of 16 layers each.
LLAMA_ARGS = ["--tensor-model-parallel-size", "4", "--pipeline-model-parallel-size", "2",
              "--bf16", "--use-distributed-optimizer", "--seq-length", "4096",
              "--max-position-embeddings", "8192"]


class Workspace(unittest.TestCase):
    """A temporary directory holding a copy of the Llama config and a job planned from it."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)
        self.config = self.root / "configs" / "llama.json"
        self.config.parent.mkdir()
        shutil.copy(ROOT / "testdata/configs/llama3-8b.json", self.config)
        self.job = self.root / "jobs" / "llama"
        self.plan_job(self.job)

    def tearDown(self):
        self.tmp.cleanup()

    def plan_job(self, out, world=64, args=LLAMA_ARGS):
        # Relative paths, as a launch script in a repository gives them.
        result = run("job", "--world-size", world, "--hf-config", "configs/llama.json", "-q",
                     "-o", out.relative_to(self.root), "--", *args, cwd=self.root)
        self.assertEqual(result.returncode, 0, result.stderr)

    def record(self, job=None):
        return json.loads(((job or self.job) / "job.json").read_text())

    def check(self, *extra, job=None):
        return run("check", job or self.job, *extra)


class LaunchRecord(Workspace):
    def test_job_json_records_the_launch_as_given(self):
        launch = self.record()["launch"]
        self.assertEqual(launch["world_size"], 64)
        self.assertEqual(launch["args"], LLAMA_ARGS)
        self.assertEqual(launch["hf_config"], "configs/llama.json")
        digest = hashlib.sha256(self.config.read_bytes()).hexdigest()
        # The config's path is relative to job.json: jobs/llama/ -> ../../configs/llama.json.
        self.assertEqual(launch["files"], [{"given": "configs/llama.json",
                                            "path": "../../configs/llama.json",
                                            "sha256": digest, "copy": "hf_config.json"}])
        # The job keeps the config's bytes as planned beside job.json.
        self.assertEqual((self.job / "hf_config.json").read_bytes(), self.config.read_bytes())

    def test_each_chunk_file_hash_is_its_bytes(self):
        for chunk in self.record()["chunks"]:
            for key in ("manifest", "layout"):
                data = (self.job / chunk[key]).read_bytes()
                self.assertEqual(chunk[key + "_sha256"], hashlib.sha256(data).hexdigest())

    def test_from_replays_to_the_same_files(self):
        # From another working directory, into another directory: paths resolve from job.json.
        out = self.root / "elsewhere" / "again"
        result = run("job", "--from", self.job / "job.json", "-o", out, "-q", cwd="/")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr, "")
        names = sorted(p.name for p in self.job.iterdir())
        self.assertEqual(sorted(p.name for p in out.iterdir()), names)
        for name in names:
            if name == "job.json":
                continue
            self.assertEqual((out / name).read_bytes(), (self.job / name).read_bytes(), name)
        replayed = self.record(out)
        self.assertEqual(replayed["launch"]["files"][0]["path"], "../../configs/llama.json")
        self.assertEqual(replayed["chunks"], self.record()["chunks"])

    def test_from_says_a_file_changed_and_plans_it_as_it_is(self):
        config = json.loads(self.config.read_text())
        config["num_hidden_layers"] = 34
        self.config.write_text(json.dumps(config))
        out = self.root / "revised"
        result = run("job", "--from", self.job, "-o", out, "-q")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("llama.json changed since the job was planned", result.stderr)
        # 34 layers over 2 stages: 17 each.
        self.assertEqual(self.record(out)["chunks"][1]["layers"], list(range(17, 34)))

    def test_tokenizer_files_are_recorded_and_replayed(self):
        data = self.root / "data"
        data.mkdir()
        # A GPT-2 BPE vocabulary of 1,000 tokens: Megatron-LM pads it to 1,024 (a multiple of
        # 128 x tp 1), so the embedding is 1,024 x 64.
        (data / "vocab.json").write_text(json.dumps({f"t{i}": i for i in range(1000)}))
        (data / "merges.txt").write_text("#version\na b\n")
        args = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
                "--max-position-embeddings", "128", "--seq-length", "128",
                "--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", "data/vocab.json",
                "--merge-file", "data/merges.txt"]
        result = run("job", "--world-size", "8", "-q", "-o", "jobs/gpt", "--", *args,
                     cwd=self.root)
        self.assertEqual(result.returncode, 0, result.stderr)
        job = self.root / "jobs" / "gpt"
        files = self.record(job)["launch"]["files"]
        self.assertEqual([f["given"] for f in files], ["data/vocab.json"])
        self.assertEqual(files[0]["path"], "../../data/vocab.json")
        manifest = (job / "stage0.chunk0.manifest.json").read_text()
        self.assertIn('"embedding.word_embeddings.weight", "shape": [1024, 64]', manifest)
        result = run("check", job, "--replan", cwd="/")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        (data / "vocab.json").write_text(json.dumps({f"t{i}": i for i in range(1100)}))
        result = run("check", job, "--replan", cwd="/")
        self.assertEqual(result.returncode, 1)
        self.assertIn("vocab.json changed since the job was planned", result.stdout)
        self.assertIn("stage0.chunk0: stale: stage0.chunk0.manifest.json differs from what the "
                      "launch gives today: 1 param changed shape or dtype "
                      "(embedding.word_embeddings.weight)", result.stdout)

    def test_stats_of_the_job_says_its_optimizer_state(self):
        # The precision-aware optimizer with bf16 moments keeps 16-bit remainders of float32
        # master weights (2 bytes) and two 2-byte moments: 6 bytes per element, which only
        # job.json knows (a layout's stats count Megatron-LM's default Adam).
        out = self.root / "jobs" / "aware"
        self.plan_job(out, args=LLAMA_ARGS + ["--use-precision-aware-optimizer",
                                              "--exp-avg-dtype", "bf16",
                                              "--exp-avg-sq-dtype", "bf16"])
        self.assertIn("6 bytes per element", self.record(out)["optimizer_state"])
        result = run("stats", out)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("optimizer state: 16-bit remainders of float32 main params", result.stdout)

    def test_from_takes_nothing_else(self):
        result = run("job", "--from", self.job, "--world-size", "8")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--from replays the launch job.json records", result.stderr)
        result = run("job", "--from", self.root / "nowhere")
        self.assertEqual(result.returncode, 2)


class CheckJob(Workspace):
    def test_a_job_holds_and_replans_to_itself(self):
        for form in (self.job, self.job / "job.json"):
            result = run("check", form, "--replan")
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            self.assertIn("holds: 2 chunks", result.stdout)
            self.assertIn("the recorded launch plans the same job today", result.stdout)

    def test_a_tampered_chunk_is_named(self):
        path = self.job / "stage1.chunk0.layout.json"
        text = path.read_text()
        # Move the first param of the layout one element on: it no longer starts where its
        # strategy puts it, and the file is no longer the one job.json names.
        match = re.search(r'"start": (\d+), "end": (\d+)', text)
        start, end = int(match.group(1)), int(match.group(2))
        path.write_text(text[:match.start()] + f'"start": {start + 1}, "end": {end + 1}' +
                        text[match.end():])
        result = self.check()
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        lines = result.stdout.splitlines()
        self.assertTrue(lines[0].startswith(
            "stage1.chunk0: stage1.chunk0.layout.json is not the file job.json names"), lines)
        self.assertTrue(any(l.startswith("stage1.chunk0: buffer 0") for l in lines), lines)
        self.assertFalse(any(l.startswith("stage0.chunk0") for l in lines), lines)

    def test_a_figure_job_json_gets_wrong_is_named(self):
        record = self.record()
        record["chunks"][1]["param_elements"] += 1
        (self.job / "job.json").write_text(json.dumps(record))
        result = self.check()
        self.assertEqual(result.returncode, 1)
        self.assertIn("stage1.chunk0: job.json records param elements", result.stdout)

    def test_a_place_job_json_gets_wrong_is_named(self):
        # Llama 3 8B's 32 layers, 16 a stage: each change below is named without --replan.
        cases = [
            (lambda r: r["chunks"][0].update(layers=list(range(15))),
             ["stage0.chunk0: its manifest holds params of the chunk's decoder layer 15",
              "job.json: no chunk holds layer 15"]),
            (lambda r: r["chunks"][1].update(layers=list(range(15, 31))),
             ["stage1.chunk0: job.json records layer 15 here and in stage0.chunk0"]),
            (lambda r: r["chunks"][1].update(layers=list(range(16, 32))[::-1]),
             ["stage1.chunk0: job.json records layers that are not one ascending run"]),
            (lambda r: r["chunks"][1].update(output=False),
             ["stage1.chunk0: job.json records no output layer on the last chunk"]),
            (lambda r: r["chunks"][0].update(output=True),
             ["stage0.chunk0: job.json records the output layer here"]),
            (lambda r: r["chunks"][0].update(embedding=False),
             ["stage0.chunk0: its manifest holds the word embeddings"]),
            (lambda r: r["chunks"][1].update(embedding=True),
             ["stage1.chunk0: job.json records the word embeddings here"]),
        ]
        original = (self.job / "job.json").read_text()
        for change, messages in cases:
            record = json.loads(original)
            change(record)
            (self.job / "job.json").write_text(json.dumps(record))
            result = self.check()
            self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
            for message in messages:
                self.assertIn(message, result.stdout)
        (self.job / "job.json").write_text(original)
        self.assertEqual(self.check().returncode, 0)

    def test_a_chunk_file_of_another_job_is_named(self):
        shutil.copy(self.job / "stage0.chunk0.layout.json", self.job / "stage5.chunk0.layout.json")
        result = self.check()
        self.assertEqual(result.returncode, 1)
        self.assertIn("stage5.chunk0.layout.json: a chunk file job.json does not name",
                      result.stdout)

    def test_the_configs_copy_is_checked(self):
        copy = self.job / "hf_config.json"
        planned = copy.read_bytes()
        copy.write_bytes(planned.replace(b'"num_hidden_layers": 32', b'"num_hidden_layers": 34'))
        self.assertNotEqual(copy.read_bytes(), planned)
        result = self.check()
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("hf_config.json is not the copy of configs/llama.json job.json records",
                      result.stdout)
        copy.unlink()
        result = self.check()
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("hf_config.json: the copy of configs/llama.json job.json records: ",
                      result.stdout)
        # A copy job.json does not name: left from another job.
        copy.write_bytes(planned)
        record = self.record()
        del record["launch"]["files"][0]["copy"]
        (self.job / "job.json").write_text(json.dumps(record))
        result = self.check()
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("hf_config.json: a config's copy job.json does not name", result.stdout)

    def test_replan_catches_a_model_revision(self):
        config = json.loads(self.config.read_text())
        config["num_hidden_layers"] = 34
        self.config.write_text(json.dumps(config))
        self.assertEqual(self.check().returncode, 0)  # the files still agree with each other
        result = self.check("--replan")
        self.assertEqual(result.returncode, 1)
        out = result.stdout
        self.assertIn("launch: stale: ", out)
        self.assertIn("llama.json changed since the job was planned", out)
        # Stage 0 now builds layers 0-16: one more Llama layer, whose params under Transformer
        # Engine are linear_qkv.{weight,layer_norm_weight}, linear_proj.weight,
        # linear_fc1.{weight,layer_norm_weight} and linear_fc2.weight: 6.
        self.assertIn("stage0.chunk0: stale: stage0.chunk0.manifest.json differs from what the "
                      "launch gives today: 6 params added (decoder.layers.16.", out)
        self.assertIn("stage1.chunk0: stale: stage1.chunk0.layout.json differs", out)

    def test_replan_catches_a_world_size_change(self):
        record = self.record()
        record["launch"]["world_size"] = 128  # dp 8 -> 16: every shard boundary moves
        (self.job / "job.json").write_text(json.dumps(record, indent=1))
        result = self.check("--replan")
        self.assertEqual(result.returncode, 1)
        self.assertIn("stage0.chunk0: stale: stage0.chunk0.layout.json differs from what the "
                      "launch gives today: options changed: dp", result.stdout)
        self.assertIn("job.json: stale: differs from what the launch gives today", result.stdout)

    def test_replan_names_both_versions(self):
        record = self.record()
        record["generator"] = "paramlayout 0.0.1"
        (self.job / "job.json").write_text(json.dumps(record, indent=1))
        result = self.check("--replan")
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertIn("written by paramlayout 0.0.1, replanned by paramlayout ", result.stdout)

    def test_replan_without_a_recorded_launch_says_so(self):
        record = self.record()
        del record["launch"]
        (self.job / "job.json").write_text(json.dumps(record, indent=1))
        (self.job / "hf_config.json").unlink()  # kept only by a job that records its launch
        self.assertEqual(self.check().returncode, 0)
        result = self.check("--replan")
        self.assertEqual(result.returncode, 2)
        self.assertIn("records none", result.stderr)

    def test_usage_errors(self):
        result = self.check("--manifest", self.job / "stage0.chunk0.manifest.json")
        self.assertEqual(result.returncode, 2)
        self.assertIn("is a job, whose chunks name their own manifests; drop --manifest",
                      result.stderr)
        result = run("check", self.job / "stage0.chunk0.layout.json")
        self.assertEqual(result.returncode, 2)
        self.assertIn("is a layout, not a job", result.stderr)
        empty = self.root / "empty"
        empty.mkdir()
        result = run("check", empty)
        self.assertEqual(result.returncode, 2)
        self.assertIn("not a job directory: it holds no job.json", result.stderr)
        (self.job / "stage0.chunk0.manifest.json").unlink()
        result = self.check()
        self.assertEqual(result.returncode, 2)
        self.assertTrue(result.stderr.startswith("paramlayout: error: stage0.chunk0: "),
                        result.stderr)


if __name__ == "__main__":
    main()
