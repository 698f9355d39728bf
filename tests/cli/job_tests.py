#!/usr/bin/env python3
"""CLI tests of `paramlayout job`: a DeepSeek-V3 launch line on 1,024 GPUs written out and
read back (job.json against its schema's required keys, every chunk's files, `check
--replan` on each), bad launch lines refused with a message and no files, and `plan`'s
warnings for manifests whose parallel config a job would plan differently.

Usage: job_tests.py PARAMLAYOUT SOURCE_ROOT
"""
import json
import os
import tempfile
import unittest
from pathlib import Path

from harness import ROOT, main, run


DEEPSEEK_ARGS = ["--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "16",
                 "--expert-model-parallel-size", "64",
                 "--pipeline-model-parallel-layout", "Et*3|(tt|)*29m|L",
                 "--mtp-num-layers", "1", "--bf16", "--use-distributed-optimizer",
                 "--overlap-grad-reduce", "--moe-grouped-gemm", "--lr", "1e-4",
                 "--data-path", "/data/a", "/data/b"]


def deepseek_job(out_dir, *extra):
    return run("job", "--world-size", "1024", "--hf-config",
               ROOT / "testdata/configs/deepseek-v3.json", "-o", out_dir, *extra, "--",
               *DEEPSEEK_ARGS)


class DeepSeekJob(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = Path(cls.tmp.name, "job")
        cls.result = deepseek_job(cls.dir)
        cls.job = json.loads((cls.dir / "job.json").read_text())

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_exit_and_summary(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)
        out = self.result.stdout
        self.assertIn("1,024 GPUs = tp 1 x pp 16 x cp 1 x dp 64", out)
        self.assertIn("ep 64 x etp 1 x expert dp 1", out)
        self.assertIn("heaviest stage:", out)
        self.assertIn("ignored 2 arguments that do not change the layout: --lr, --data-path", out)

    def test_job_json_holds_the_required_keys(self):
        schema = json.loads((ROOT / "schemas/job.schema.json").read_text())
        for key in schema["required"]:
            self.assertIn(key, self.job)
        chunk_keys = schema["properties"]["chunks"]["items"]["required"]
        for chunk in self.job["chunks"]:
            for key in chunk_keys:
                self.assertIn(key, chunk)
        self.assertEqual(self.job["schema"], "paramlayout.job/v1")
        self.assertEqual((self.job["dp"], self.job["expert_dp"], self.job["vpp"]), (64, 1, 2))
        self.assertEqual(self.job["grad_dtype"], "float32")
        self.assertEqual(self.job["ignored_arguments"], ["--lr 1e-4", "--data-path /data/a /data/b"])

    def test_every_layer_once(self):
        layers = sorted(l for c in self.job["chunks"] for l in c["layers"])
        self.assertEqual(layers, list(range(61)))
        self.assertEqual([c["mtp_layers"] for c in self.job["chunks"] if c["mtp_layers"]], [[0]])
        self.assertEqual(sum(c["output"] for c in self.job["chunks"]), 1)

    def test_only_the_first_chunk_is_bucketed(self):
        sizes = [c["bucket_size"] for c in self.job["chunks"]]
        self.assertEqual(sizes[0], 64_000_000)
        self.assertEqual(set(sizes[1:]), {None})

    def test_files_and_check_replan(self):
        expected = {"job.json", "hf_config.json"}  # the config's copy, as planned
        for c in self.job["chunks"]:
            expected |= {c["manifest"], c["layout"]}
        self.assertEqual(set(os.listdir(self.dir)), expected)
        for c in self.job["chunks"][:4] + self.job["chunks"][-4:]:
            result = run("check", self.dir / c["layout"], "--manifest", self.dir / c["manifest"],
                         "--replan")
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            manifest = json.loads((self.dir / c["manifest"]).read_text())
            self.assertEqual(manifest["parallel"]["stage"], c["stage"])
            self.assertEqual(manifest["parallel"]["chunk"], c["chunk"])
            self.assertEqual(manifest["parallel"]["ep"], 64)

    def test_heaviest_stage_is_the_largest_sum(self):
        totals = {}
        for c in self.job["chunks"]:
            b = c["bytes_per_rank"]
            totals[c["stage"]] = totals.get(c["stage"], 0) + b["params"] + b["grads"] + b["optimizer"]
        heaviest = self.job["heaviest_stage"]
        self.assertEqual(totals[heaviest["stage"]], max(totals.values()))


class BadJobs(unittest.TestCase):
    CASES = [
        (["--world-size", "6", "--", "--num-layers", "2", "--hidden-size", "8",
          "--num-attention-heads", "2", "--vocab-size", "10", "--max-position-embeddings", "8",
          "--tensor-model-parallel-size", "4"],
         "--world-size: 6 is not divisible by tp x pp x cp = 4 x 1 x 1 = 4"),
        (["--world-size", "2", "--", "--num-layers", "3", "--hidden-size", "8",
          "--num-attention-heads", "2", "--vocab-size", "10", "--max-position-embeddings", "8",
          "--pipeline-model-parallel-size", "2"],
         "the 3 layers are not divisible by the 2 pipeline stages"),
        (["--world-size", "1", "--", "--hidden-size", "8"], "--num-layers: is required"),
        (["--world-size", "1", "--", "--num-layers", "2", "--hidden-size", "8",
          "--num-attention-heads", "2", "--vocab-size", "10", "--max-position-embeddings", "8",
          "--use-megatron-fsdp"],
         "--use-megatron-fsdp: Megatron-FSDP lays out its own buffers"),
        (["--world-size", "16", "--hf-config", "CONFIG", "--", "--pipeline-model-parallel-size",
          "16", "--pipeline-model-parallel-layout", "Et*3|(tt|)*29m|L"],
         "--pipeline-model-parallel-layout: the layout holds 1 multi-token prediction layers"),
        (["--world-size", "1", "--hf-config", "CONFIG", "--", "--hidden-size", "4096"],
         "--hidden-size: 4096 disagrees with the --hf-config model's 7168"),
    ]

    def test_bad_jobs_exit_2_and_write_nothing(self):
        config = str(ROOT / "testdata/configs/deepseek-v3.json")
        for args, message in self.CASES:
            args = [config if a == "CONFIG" else a for a in args]
            with self.subTest(message), tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp, "job")
                result = run("job", "-o", out, *args)
                self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
                self.assertIn(message, result.stderr)
                self.assertNotIn("Traceback", result.stderr)
                self.assertFalse(out.exists(), "no output directory on failure")


SMALL = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--vocab-size", "1000", "--max-position-embeddings", "64"]


class Wording(unittest.TestCase):
    """The summary says what is true of the job at hand."""

    def summary(self, world, *args):
        result = run("job", "--world-size", world, "--", *SMALL, *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    def test_no_distributed_optimizer_shards_nothing(self):
        out = self.summary(24, "--bf16")
        self.assertNotIn("sharded over", out)
        self.assertIn("buffers not sharded (no distributed optimizer), grads all-reduced over "
                      "24 ranks", out)
        self.assertIn("buffers sharded over 24 ranks",
                      self.summary(24, "--bf16", "--use-distributed-optimizer"))

    def test_expert_buffers_only_where_experts_have_their_own(self):
        moe = ["--num-experts", "4", "--disable-bias-linear", "--bf16",
               "--use-distributed-optimizer"]
        # ep 1, etp = tp: the experts share the dense buffers.
        self.assertNotIn("expert buffers", self.summary(8, *moe))
        self.assertIn("(expert buffers over 4)",
                      self.summary(8, *moe, "--expert-model-parallel-size", "2"))

    def test_dp_1_sends_nothing(self):
        out = self.summary(1, "--bf16", "--use-distributed-optimizer")
        self.assertIn("no data-parallel traffic", out)
        self.assertNotIn("reduce-scatters", out)

    def test_fp16_counts_float32_grad_copies(self):
        # optimizer.py:1097: main_grad.float() copies each float16 grad: 4 + 8 + 4 bytes; the
        # distributed optimizer copies its shard of it (distrib_optimizer.py:2792,
        # shard_model_grad.float()), the precision-aware one does not (:2790, decoupled_grad).
        out = self.summary(2, "--fp16")
        self.assertIn("float32 copies of the grads: 16 bytes per element", out)
        self.assertIn("float32 copies of the grads: 16 bytes per element",
                      self.summary(2, "--fp16", "--use-distributed-optimizer"))
        self.assertIn("12 bytes per element",
                      self.summary(2, "--fp16", "--use-distributed-optimizer",
                                   "--accumulate-allreduce-grads-in-fp32"))


    def test_emerging_optimizers_say_which_params_they_take(self):
        # emerging_optimizers.py:140-147: Adam for embeddings, output layer, params not 2-D
        # (under Muon, --muon-scalar-optimizer); soap.py:151-158 SOAP's per-matrix factors.
        dist = ("--bf16", "--use-distributed-optimizer")
        out = self.summary(2, *dist, "--optimizer", "soap")
        self.assertIn("SOAP for matrices: float32 main params + two float32 moments: 12 bytes "
                      "per element + float32 preconditioners of 2 x (rows^2 + cols^2) per "
                      "matrix; Adam for the rest (embeddings, output layer, params not 2-D): "
                      "float32 main params + two float32 moments: 12 bytes per element", out)
        out = self.summary(2, *dist, "--optimizer", "muon", "--muon-scalar-optimizer", "lion")
        self.assertIn("Muon for matrices: float32 main params + a float32 momentum: 8 bytes per "
                      "element; Lion for the rest (embeddings, output layer, params not 2-D or "
                      "marked use_muon=False): float32 main params + a float32 momentum: 8 "
                      "bytes per element", out)
        self.assertIn("adaptive Muon for matrices: float32 main params + a float32 momentum "
                      "and second moment: 12 bytes per element",
                      self.summary(2, *dist, "--optimizer", "adaptive_muon"))
        self.assertIn("Lion for matrices", self.summary(2, *dist, "--optimizer", "lion"))
        # layer_wise_optimizer.py:713-760: the legacy path deals whole params out by size.
        out = self.summary(2, *dist, "--optimizer", "muon", "--no-use-layer-wise-param-layout")
        self.assertIn("deals whole params out to the data-parallel ranks by size", out)
        self.assertNotIn("deals whole", self.summary(2, *dist, "--optimizer", "muon"))

    def test_offload_fraction_says_what_stays_on_the_gpu(self):
        offload = ("--bf16", "--use-distributed-optimizer", "--use-precision-aware-optimizer",
                   "--optimizer-cpu-offload")
        out = self.summary(2, *offload, "--optimizer-offload-fraction", "0.25")
        self.assertIn("each rank's first 25% of its params, in the optimizer groups' order, "
                      "keep float32 params, grads and moments in pinned host memory; the rest "
                      "keep on the GPU 12 bytes per element", out)
        everything = self.summary(2, *offload)
        self.assertIn("none on the GPU", everything)
        self.assertIn("moves no param to the host: on the GPU 12 bytes per element",
                      self.summary(2, *offload, "--optimizer-offload-fraction", "0"))
        # Less offloaded, more optimizer bytes on the GPU.
        with tempfile.TemporaryDirectory() as tmp:
            figures = []
            for fraction in ("1", "0.75", "0.25", "0"):
                out = Path(tmp, fraction)
                result = run("job", "--world-size", "2", "-q", "-o", out, "--", *SMALL,
                             *offload, "--optimizer-offload-fraction", fraction)
                self.assertEqual(result.returncode, 0, result.stderr)
                record = json.loads(Path(out, "job.json").read_text())
                figures.append(sum(c["bytes_per_rank"]["optimizer"] for c in record["chunks"]))
            self.assertEqual(figures[0], 0)
            self.assertLess(figures[1], figures[2])
            self.assertLess(figures[2], figures[3])


class QuantizedParams(unittest.TestCase):
    """mxfp8 and nvfp4 params as Megatron-LM d98e8a64's DDP keeps them
    (param_and_grad_buffer.py): written to the layouts, held by check."""

    LINE = SMALL + ["--bf16", "--use-distributed-optimizer", "--disable-bias-linear"]

    def job(self, tmp, *args):
        out = Path(tmp, "job")
        result = run("job", "--world-size", "2", "-o", out, "--", *self.LINE, *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        layout = out / "stage0.chunk0.layout.json"
        return out, layout, json.loads(layout.read_text())

    @staticmethod
    def quantized(layout):
        return next(b for b in layout["buffers"] if b["param_dtype"] == "uint8")

    def test_mxfp8_params_live_in_the_grad_buffer(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, path, layout = self.job(tmp, "--fp8-format", "e4m3", "--fp8-recipe", "mxfp8",
                                         "--fp8-param-gather",
                                         "--reuse-grad-buf-for-mxfp8-param-ag")
            buffer = self.quantized(layout)
            self.assertEqual(buffer["param_buffer"], {"in_grad_buffer": True})
            # 1162-1177: no param bytes of its own; its all-gather moves bfloat16.
            traffic = layout["stats"]["traffic_per_step"]["buffers"]
            gathered = traffic[layout["buffers"].index(buffer)]["all_gather_bytes"]
            self.assertEqual(gathered, 2 * buffer["numel"])
            manifest = out / "stage0.chunk0.manifest.json"
            checked = run("check", path, "--manifest", manifest, "--replan")
            self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)
            buffer["param_buffer"]["in_grad_buffer"] = False
            path.write_text(json.dumps(layout))
            checked = run("check", path, "--manifest", manifest)
            self.assertEqual(checked.returncode, 1, checked.stdout + checked.stderr)
            self.assertIn("param_buffer", checked.stdout + checked.stderr)

    def test_nvfp4_params_are_packed(self):
        with tempfile.TemporaryDirectory() as tmp:
            out, path, layout = self.job(tmp, "--fp4-format", "e2m1", "--fp4-param-gather")
            packed = self.quantized(layout)["param_buffer"]
            self.assertFalse(packed["in_grad_buffer"])
            self.assertEqual(len(packed["params"]), len(self.quantized(layout)["params"]))
            checked = run("check", out, "--replan")
            self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)

    def test_mxfp8_without_reusing_the_grad_buffer_is_refused(self):
        result = run("job", "--world-size", "2", "--", *self.LINE, "--fp8-format", "e4m3",
                     "--fp8-recipe", "mxfp8", "--fp8-param-gather")
        self.assertEqual(result.returncode, 2, result.stdout)
        self.assertIn("--reuse-grad-buf-for-mxfp8-param-ag", result.stderr)


class PlanWarnings(unittest.TestCase):
    def test_expert_dp_and_grad_dtype(self):
        with tempfile.TemporaryDirectory() as tmp:
            manifest = Path(tmp, "m.json")
            synth = run("synth", ROOT / "testdata/configs/mixtral-8x7b.json", "--ep", "8", "-q",
                        "-o", manifest)
            self.assertEqual(synth.returncode, 0, synth.stderr)
            self.assertEqual(json.loads(manifest.read_text())["parallel"]["ep"], 8)
            result = run("plan", manifest, "--dp", "16", "-o", Path(tmp, "l.json"))
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("dp x tp / (ep x etp) = 2 ranks, not dp 16", result.stderr)
            self.assertIn("reduces grads in float32", result.stderr)
            quiet = run("plan", manifest, "--dp", "16", "--expert-dp", "2",
                        "--grad-reduce-in-fp32", "-o", Path(tmp, "l.json"))
            self.assertEqual(quiet.stderr, "")


class Memory(unittest.TestCase):
    """The memory table: activations against Table 2 worked out by hand, the room left on a
    GPU against its driver's total less the headroom, and the refusals."""
    S, B, H, V = 64, 2, 64, 1024  # the vocabulary of 1000 padded to a multiple of 128
    LINE = SMALL + ["--seq-length", "64", "--micro-batch-size", "2"]

    def job(self, tmp, *args):
        out = Path(tmp, "job")
        result = run("job", "--world-size", "1", "-o", out, *args, "--", *self.LINE)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout, json.loads((out / "job.json").read_text())["memory"]

    def test_activations_are_table_2s(self):
        with tempfile.TemporaryDirectory() as tmp:
            _, memory = self.job(tmp)
        sb, h = self.S * self.B, self.H
        stage = memory["stages"][0]
        self.assertEqual(stage["activations"], {
            "decoder_layers": 2 * 34 * sb * h,
            "embedding": 8 * sb + sb * h,
            "output_and_loss": 4 * sb * h + 4 * sb * self.V})
        self.assertEqual(stage["peak_bytes"], stage["persistent_bytes"] + sum(
            stage["activations"].values()))
        self.assertIn("micro batch 2 x sequence 64", memory["activations_for"])

    def test_room_on_a_gpu(self):
        with tempfile.TemporaryDirectory() as tmp:
            stdout, memory = self.job(tmp, "--gpu-memory", "h100", "--headroom", "2")
        room = (81559 << 20) - (2 << 30) - memory["stages"][0]["peak_bytes"]
        self.assertIn("fits on H100 (79.65 GiB) with 2.00 GiB headroom", stdout)
        self.assertIn(f"{room / (1 << 30):.2f} GiB to spare", stdout)
        self.assertIn("not modelled, left to the headroom", stdout)

    def test_does_not_fit(self):
        with tempfile.TemporaryDirectory() as tmp:
            stdout, _ = self.job(tmp, "--gpu-memory", "0.001", "--headroom", "0")
        self.assertIn("does not fit on the GPU", stdout)
        self.assertIn("short", stdout)

    def test_without_seq_length(self):
        result = run("job", "--world-size", "1", "--gpu-memory", "H100", "--", *SMALL)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("activations and peak need --seq-length", result.stdout)
        self.assertIn("no verdict on the GPU", result.stdout)

    def test_refusals(self):
        for args, message in [
                (["--gpu-memory", "V100"], "--gpu-memory: expected GiB (a number > 0) or a GPU"),
                (["--gpu-memory", "-3"], "--gpu-memory: expected GiB"),
                (["--", *SMALL, "--recompute-activations", "--recompute-method", "uniform"],
                 "--recompute-method: is not supported with selective recompute")]:
            with self.subTest(message):
                line = args if "--" in args else [*args, "--", *SMALL]
                result = run("job", "--world-size", "1", *line)
                self.assertEqual(result.returncode, 2, result.stdout)
                self.assertIn(message, result.stderr)

    def test_sequence_split_over_context_parallel_ranks(self):
        # arguments.py:947-949: cp 4 needs a multiple of 8; 64 is one, 60 is not.
        line = ["--context-parallel-size", "4", "--seq-length"]
        accepted = run("job", "--world-size", "4", "--", *SMALL, *line, "64")
        self.assertEqual(accepted.returncode, 0, accepted.stderr)
        refused = run("job", "--world-size", "4", "--", *SMALL, *line, "60")
        self.assertEqual(refused.returncode, 2, refused.stdout)
        self.assertIn("--seq-length: 60 is not a multiple of 2 x --context-parallel-size = 8",
                      refused.stderr)


if __name__ == "__main__":
    main()
