#!/usr/bin/env python3
"""CLI tests of `paramlayout diff OLD_JOB NEW_JOB`: a model revision (the same launch with a
config of a larger vocabulary and more layers), a world-size change, identical jobs (the same
launch planned twice, and replayed by `job --from`), the JSON, and the inputs refused.

Expected figures are worked out by hand from Llama 3 8B's published shapes (hidden 4096, 32
query and 8 key-value heads of 128, ffn 14336, RMSNorm, no biases, untied embeddings) at
tp 2, and Megatron-LM's vocabulary padding to a multiple of 128 x tp.

Usage: job_diff_tests.py PARAMLAYOUT SOURCE_ROOT
"""
import json
import shutil
import tempfile
import unittest
from pathlib import Path

from harness import ROOT, main, run


LAUNCH = ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--bf16",
          "--use-distributed-optimizer"]

# One Llama 3 8B layer on one of 2 tensor-parallel ranks: linear_qkv (32 + 2 x 8) x 128 / 2
# rows of 4096, linear_proj 4096 x 4096 / 2, linear_fc1 2 x 14336 / 2 rows of 4096,
# linear_fc2 4096 x 14336 / 2, and the two RMSNorm weights fused into qkv and fc1 (4096 each).
LAYER_ELEMENTS = (48 * 128 // 2) * 4096 + 4096 * 2048 + 14336 * 4096 + 4096 * 7168 + 2 * 4096
LAYER_PARAMS = 6


def padded_rows(vocab, tp):
    """Megatron-LM's vocabulary padded to a multiple of 128 x tp, over tp ranks."""
    multiple = 128 * tp
    return (vocab + multiple - 1) // multiple * multiple // tp


def plan(out, config, world=8, *extra):
    result = run("job", "--world-size", world, "--hf-config", config, "-o", out, "--", *LAUNCH,
                 *extra)
    assert result.returncode == 0, result.stderr
    return out


class Jobs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        tmp = Path(cls.tmp.name)
        config = json.loads((ROOT / "testdata/configs/llama3-8b.json").read_text())
        cls.old_config = tmp / "llama.json"
        cls.old_config.write_text(json.dumps(config, indent=2))
        config["vocab_size"] = 130000
        config["num_hidden_layers"] = 34
        cls.new_config = tmp / "llama-revised.json"
        cls.new_config.write_text(json.dumps(config, indent=2))
        cls.old = plan(tmp / "old", cls.old_config)
        cls.revised = plan(tmp / "revised", cls.new_config)
        cls.wider = plan(tmp / "wider", cls.old_config, 16)
        cls.again = plan(tmp / "again", cls.old_config)
        replay = run("job", "--from", cls.old / "job.json", "-o", tmp / "replayed")
        assert replay.returncode == 0, replay.stderr
        cls.replayed = tmp / "replayed"

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def diff(self, old, new, *extra, code=1):
        result = run("diff", old, new, *extra)
        self.assertEqual(result.returncode, code, result.stdout + result.stderr)
        self.assertNotIn("Traceback", result.stderr)
        return result.stdout

    def test_model_revision(self):
        out = self.diff(self.old, self.revised)
        lines = [l.split() for l in out.splitlines()]
        # The config's fields, nested keys aside, as the two files differ.
        self.assertIn(["num_hidden_layers", "32", "->", "34"], lines)
        self.assertIn(["vocab_size", "128,256", "->", "130,000"], lines)
        # 128,256 rows stay 128,256 (a multiple of 256), 64,128 per rank; 130,000 pad to
        # 130,048, 65,024 per rank. The embedding (stage 0) and the untied output layer
        # (stage 1) grow.
        old_rows, new_rows = padded_rows(128256, 2), padded_rows(130000, 2)
        self.assertEqual((old_rows, new_rows), (64128, 65024))
        shapes = f"[{old_rows}, 4096] -> [{new_rows}, 4096]"
        self.assertIn(f"embedding.word_embeddings.weight  {shapes}  stage0.chunk0", out)
        self.assertIn(f"output_layer.weight               {shapes}  stage1.chunk0", out)
        # 32 layers at pp 2: 0-15 and 16-31; 34 layers: 0-16 and 17-33. Layer 16 moves to
        # stage 0, layers 32 and 33 are new in stage 1.
        layer = f"{LAYER_PARAMS} params, {LAYER_ELEMENTS:,} elements"
        self.assertIn(["decoder.layers.16.*", *layer.split(), "stage1.chunk0", "->",
                       "stage0.chunk0"], lines)
        for added in (32, 33):
            self.assertIn([f"decoder.layers.{added}.*", *layer.split(), "stage1.chunk0"], lines)
        self.assertIn(f"params added ({2 * LAYER_PARAMS})", out)
        # Each stage gains a layer and 896 rows of 4096.
        gain = LAYER_ELEMENTS + (new_rows - old_rows) * 4096
        rows = [l for l in out.splitlines() if l.startswith("  stage")]
        self.assertEqual(len(rows), 2, out)
        for row in rows:
            self.assertIn(f"(+{gain:,})", row)
        self.assertIn("E 0-15 -> E 0-16", rows[0])
        self.assertIn("16-31 L -> 17-33 L", rows[1])
        self.assertTrue(out.startswith("options changed: model; config: 2 fields differ; params: "
                                       "12 added, 2 resized, 6 moved to another chunk; 2 of 2 "
                                       "chunks differ\n"), out)

    def test_config_edited_in_place_is_compared_from_the_jobs_copies(self):
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp, "config.json")
            shutil.copy(self.old_config, config)
            old = plan(Path(tmp, "old"), config)
            shutil.copy(self.new_config, config)
            new = plan(Path(tmp, "new"), config)
            config.unlink()
            # Each job keeps the config it was planned from: the fields are still compared.
            self.assertEqual((old / "hf_config.json").read_bytes(),
                             self.old_config.read_bytes())
            out = self.diff(old, new)
            lines = [l.split() for l in out.splitlines()]
            self.assertIn(["num_hidden_layers", "32", "->", "34"], lines)
            self.assertIn(["vocab_size", "128,256", "->", "130,000"], lines)
            # A copy that is not the config job.json records is refused, named.
            (old / "hf_config.json").write_text("{}")
            result = run("diff", old, new)
            self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
            self.assertIn("hf_config.json is not the copy of", result.stderr)
            # A job written without a copy: the config is read where the launch read it,
            # and where it changed (or is gone) it is not compared; the params still are.
            (old / "hf_config.json").unlink()
            record = json.loads((old / "job.json").read_text())
            for f in record["launch"]["files"]:
                f.pop("copy", None)
            (old / "job.json").write_text(json.dumps(record))
            shutil.copy(self.new_config, config)
            out = self.diff(old, new)
            self.assertIn("not compared: ", out)
            self.assertIn(f"the old job's {config} changed since it was planned", out)
            self.assertIn("decoder.layers.16.*", out)

    def test_world_size_change(self):
        out = self.diff(self.old, self.wider)
        lines = [l.split() for l in out.splitlines()]
        # dp = world / (tp x pp x cp): 8 / 4 = 2 -> 16 / 4 = 4.
        for row in (["world_size", "8", "->", "16"], ["dp", "2", "->", "4"],
                    ["dense_shards", "2", "->", "4"]):
            self.assertIn(row, lines)
        self.assertNotIn("params added", out)
        self.assertNotIn("launch arguments", out)
        result = json.loads(self.diff(self.old, self.wider, "--json"))
        for chunk in result["chunks"]:
            before, after = chunk["before"]["bytes_per_rank"], chunk["after"]["bytes_per_rank"]
            # Params and grads are whole on every rank; the distributed optimizer's 12 bytes
            # per element (float32 main params and two moments) are sharded over dp.
            self.assertEqual(before["params"], after["params"])
            self.assertEqual(before["grads"], after["grads"])
            self.assertAlmostEqual(before["optimizer"] / after["optimizer"], 2, delta=0.01)
            self.assertEqual(chunk["status"], "differs")
            self.assertEqual(chunk["layout"]["options"][0],
                             {"option": "dp", "before": 2, "after": 4})

    def test_identical_jobs(self):
        for other in (self.again, self.replayed / "job.json"):
            out = self.diff(self.old, other, code=0)
            self.assertEqual(out, "identical\n")
            result = json.loads(self.diff(self.old / "job.json", other, "--json", code=0))
            self.assertTrue(result["identical"])

    def test_another_generator_is_said(self):
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp, "job")
            shutil.copytree(self.old, copy)
            job = json.loads((copy / "job.json").read_text())
            job["generator"] = "paramlayout 9.9.9"
            (copy / "job.json").write_text(json.dumps(job))
            out = self.diff(self.old, copy, code=0)
            self.assertIn("identical\n", out)
            self.assertIn("and paramlayout 9.9.9 (new)", out)

    def test_a_job_without_its_launch(self):
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp, "job")
            shutil.copytree(self.old, copy)
            job = json.loads((copy / "job.json").read_text())
            del job["launch"]
            (copy / "job.json").write_text(json.dumps(job))
            out = self.diff(copy, self.old)
            self.assertTrue(out.startswith("only the new job records its launch\n"), out)
            self.assertIn("arguments and config not compared", out)
            self.assertIn("chunks: all 2 identical", out)

    def test_json(self):
        result = json.loads(self.diff(self.old, self.revised, "--json"))
        for key in ("identical", "verdict", "generator", "options", "heaviest_stage", "launch",
                    "ignored_arguments", "notes", "config", "params", "chunks"):
            self.assertIn(key, result)
        self.assertFalse(result["identical"])
        fields = {f["key"]: (f["before"], f["after"]) for f in result["config"]["fields"]}
        self.assertEqual(fields, {"num_hidden_layers": (32, 34), "vocab_size": (128256, 130000)})
        params = result["params"]
        self.assertEqual(len(params["added"]), 2 * LAYER_PARAMS)
        self.assertEqual(len(params["moved"]), LAYER_PARAMS)
        self.assertEqual({p["name"] for p in params["resized"]},
                         {"embedding.word_embeddings.weight", "output_layer.weight"})
        for chunk in result["chunks"]:
            self.assertEqual(chunk["status"], "differs")
            self.assertIn("verdict", chunk["layout"])
        self.assertEqual(result["chunks"][0]["params"]["moved_in"], LAYER_PARAMS)

    def test_launch_arguments(self):
        with tempfile.TemporaryDirectory() as tmp:
            other = plan(Path(tmp, "job"), self.old_config, 8, "--overlap-grad-reduce")
            out = self.diff(self.old, other)
            self.assertIn("--overlap-grad-reduce  (not given) -> (given)", out)

    def test_job_against_layout_is_refused(self):
        layout = self.old / "stage0.chunk0.layout.json"
        for old, new in ((self.old, layout), (layout, self.old / "job.json")):
            result = run("diff", old, new)
            self.assertEqual(result.returncode, 2)
            self.assertIn("is a job and", result.stderr)
            self.assertIn("stage0.chunk0.layout.json is not", result.stderr)
            self.assertIn("diff compares two jobs", result.stderr)
            self.assertEqual(result.stdout, "")
        result = run("diff", self.old, self.old / "gone.json")
        self.assertEqual(result.returncode, 2)
        self.assertIn("gone.json: cannot open", result.stderr)

    def test_tampered_chunk_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp, "job")
            shutil.copytree(self.old, copy)
            layout = copy / "stage1.chunk0.layout.json"
            layout.write_text(layout.read_text() + "\n")
            result = run("diff", self.old, copy)
            self.assertEqual(result.returncode, 2, result.stdout)
            self.assertIn("stage1.chunk0.layout.json is not the file job.json names",
                          result.stderr)


class DeepSeekWorldSize(unittest.TestCase):
    """A 1,024-GPU DeepSeek-V3 job (32 chunks) against the same launch on 2,048 GPUs: the chunks
    that changed alike fold, and the whole diff fits a screen."""

    ARGS = ["--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "16",
            "--expert-model-parallel-size", "64",
            "--pipeline-model-parallel-layout", "Et*3|(tt|)*29m|L", "--mtp-num-layers", "1",
            "--bf16", "--use-distributed-optimizer", "--overlap-grad-reduce",
            "--moe-grouped-gemm"]

    def test_folded_and_compact(self):
        with tempfile.TemporaryDirectory() as tmp:
            config = ROOT / "testdata/configs/deepseek-v3.json"
            for world in (1024, 2048):
                result = run("job", "--world-size", world, "--hf-config", config, "-o",
                             Path(tmp, str(world)), "--", *self.ARGS)
                self.assertEqual(result.returncode, 0, result.stderr)
            result = run("diff", Path(tmp, "1024"), Path(tmp, "2048"))
            self.assertEqual(result.returncode, 1, result.stderr)
            out = result.stdout
            # dp = 1,024 / 16 = 64 -> 128; expert dp = 1,024 / (64 x 16) = 1 -> 2.
            self.assertIn("dp              64 -> 128", out)
            self.assertIn("expert_dp       1 -> 2", out)
            self.assertIn("32 of 32 chunks differ", out)
            self.assertIn("chunks alike", out)
            self.assertLess(len(out.splitlines()), 40, out)
            self.assertLessEqual(max(len(l) for l in out.splitlines()), 120, out)


class DeepSeekVocabulary(unittest.TestCase):
    """The same 1,024-GPU DeepSeek-V3 launch with a config of a larger vocabulary: only the
    chunks holding a copy of the embedding or the output layer change, the rest fold."""

    def test_only_the_edge_chunks_change(self):
        with tempfile.TemporaryDirectory() as tmp:
            config = json.loads((ROOT / "testdata/configs/deepseek-v3.json").read_text())
            Path(tmp, "old").mkdir()
            Path(tmp, "new").mkdir()
            Path(tmp, "old/deepseek-v3.json").write_text(json.dumps(config))
            config["vocab_size"] = 131072
            Path(tmp, "new/deepseek-v3.json").write_text(json.dumps(config))
            for name in ("old", "new"):
                result = run("job", "--world-size", 1024, "--hf-config",
                             Path(tmp, name, "deepseek-v3.json"), "-o", Path(tmp, name, "job"),
                             "--", *DeepSeekWorldSize.ARGS)
                self.assertEqual(result.returncode, 0, result.stderr)
            result = run("diff", Path(tmp, "old/job"), Path(tmp, "new/job"))
            self.assertEqual(result.returncode, 1, result.stderr)
            out = result.stdout
            self.assertTrue(out.startswith("config: 1 field differs; params: 3 resized; 3 of 32 "
                                           "chunks differ\n"), out)
            # 129,280 and 131,072 are multiples of 128 (tp 1): 1,792 more rows of 7,168 in
            # the embedding (stage 0), its copy beside the MTP layer and the output layer.
            gain = (131072 - 129280) * 7168
            shapes = "[129280, 7168] -> [131072, 7168]"
            for name, chunk in (("embedding.word_embeddings.weight", "stage0.chunk0"),
                                ("embedding.word_embeddings.weight", "stage14.chunk1"),
                                ("output_layer.weight", "stage15.chunk1")):
                self.assertIn([name, *shapes.split(), chunk],
                              [l.split() for l in out.splitlines()])
                row = next(l for l in out.splitlines() if l.startswith("  " + chunk + " "))
                self.assertIn(f"(+{gain:,})", row)
            # Stage 0's second chunk to stage 14's first: 2 x 14 chunks between them.
            self.assertIn("  stage0.chunk1 .. stage14.chunk0: identical (28 chunks)\n", out)
            self.assertIn("  stage15.chunk0: identical\n", out)


class Memory(unittest.TestCase):
    """A recompute change: the layouts are the same, the heaviest rank's peak is not. Under
    full uniform recompute in groups of one layer, 4 layers keep only their inputs (2sbh each)
    and one layer's 34sbh is recomputed at a time (Table 2, no parallelism)."""
    LINE = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
            "--seq-length", "128", "--max-position-embeddings", "128", "--vocab-size", "1000",
            "--bf16", "--use-distributed-optimizer"]

    def test_recompute_changes_the_peak_only(self):
        s, h = 128, 64
        with tempfile.TemporaryDirectory() as tmp:
            old, new = Path(tmp, "old"), Path(tmp, "new")
            for out, extra in ((old, []), (new, ["--recompute-granularity", "full",
                                                 "--recompute-method", "uniform"])):
                result = run("job", "--world-size", "2", "-q", "-o", out, "--", *self.LINE,
                             *extra)
                self.assertEqual(result.returncode, 0, result.stderr)
            text = run("diff", old, new)
            self.assertEqual(text.returncode, 1, text.stderr)
            self.assertIn("heaviest peak  stage 0: ", text.stdout)
            self.assertIn("chunks: all 1 identical", text.stdout)
            peak = json.loads(run("diff", old, new, "--json").stdout)["heaviest_peak"]
        saved = peak["before"]["activation_bytes"] - peak["after"]["activation_bytes"]
        self.assertEqual(saved, 4 * 34 * s * h - (4 * 2 * s * h + 34 * s * h))
        self.assertEqual(peak["before"]["persistent_bytes"], peak["after"]["persistent_bytes"])


if __name__ == "__main__":
    main()
