#!/usr/bin/env python3
"""What users read: one padding figure, traffic per step worked out by hand, warnings for
plans far off their alternatives, diffs that name option changes, a layout's stats held to
the layout, one -o rule, dtypes as people write them, '-' for stdout.

Usage: figures_tests.py PARAMLAYOUT SOURCE_ROOT
"""
import json
import os
import tempfile
import unittest
from pathlib import Path

from harness import ROOT, main, run


def manifest_file(tmp, *params, name="m.json", model="hand"):
    path = Path(tmp, name)
    path.write_text(json.dumps({"schema": "paramlayout.manifest/v1", "model": model, "params": [
        {"name": n, "shape": shape, "dtype": dtype} for n, shape, dtype in params]}))
    return path


def planned(tmp, manifest, *args, name="layout.json"):
    out = Path(tmp, name)
    result = run("plan", manifest, "-q", "-o", out, *args)
    assert result.returncode == 0, result.stderr
    return out


def stats_json(layout, manifest, *args):
    result = run("stats", layout, "--manifest", manifest, "--json", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# A [128, 64] and a [64, 64] bfloat16 matrix: layerwise at dp 2, each alone in a shard of
# 8192 elements: one bucket of 16384, 4096 of them padding.
TWO_MATRICES = (("a", [128, 64], "bfloat16"), ("b", [64, 64], "bfloat16"))
LAYERWISE_DP2 = ("--dp", "2", "--strategy", "layerwise", "--bucket-size", "1048576")


class Padding(unittest.TestCase):
    def test_padding_is_a_share_of_the_buffers_everywhere(self):
        with tempfile.TemporaryDirectory() as tmp:
            m = manifest_file(tmp, *TWO_MATRICES)
            layout = planned(tmp, m, *LAYERWISE_DP2)
            s = stats_json(layout, m)
            # 4096 of 16384 elements: 25%, not 4096 / 12288 (33.33%) of the param elements.
            self.assertEqual((s["padding"], s["param_elements"]), (4096, 12288))
            self.assertEqual(s["padding_percent"], 25.0)
            self.assertEqual(s["floor_percent"], 25.0)  # max(12288, 2 x 8192) = 16384
            self.assertEqual(json.loads(layout.read_text())["stats"]["padding_percent"], 25.0)
            summary = run("plan", m, *LAYERWISE_DP2, "-o", Path(tmp, "again.json")).stdout
            self.assertIn("  padding 25.00% of the buffers (floor 25.00%)", summary)
            row = next(line for line in summary.splitlines() if "layerwise " in line)
            self.assertIn(" 25.00% ", row)
            text = run("stats", layout, "--manifest", m).stdout
            self.assertIn("padding 25.00% of the buffers", text)
            self.assertNotIn("of param elements", summary + text)

    def test_the_job_table_says_the_same(self):
        result = run("job", "--world-size", "8", "--", "--num-layers", "2", "--hidden-size", "256",
                     "--num-attention-heads", "4", "--seq-length", "128",
                     "--max-position-embeddings", "128", "--vocab-size", "1000", "--bf16",
                     "--use-distributed-optimizer", "--optimizer", "muon")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("padding", result.stdout)
        self.assertRegex(result.stdout, r"most traffic: stage 0, each rank sends [\d.]+ \w+ per "
                                        r"step \([\d.]+% padding\)")


class FarOff(unittest.TestCase):
    def test_a_packer_far_off_the_other_is_named(self):
        m = ROOT / "testdata/reference/manifests/mixtral-8x7b-tp2-ep8.json"
        with tempfile.TemporaryDirectory() as tmp:
            result = run("plan", m, "--dp", "8", "--strategy", "layerwise", "-o",
                         Path(tmp, "l.json"))
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("warning: ", result.stderr)
            self.assertIn("layerwise at dp 8 pads 28.62% of its buffers", result.stderr)
            self.assertIn("--packer balanced: 0.00% padding", result.stderr)
            self.assertIn("--strategy sequential-dp", result.stderr)
            balanced = run("plan", m, "--dp", "8", "--strategy", "layerwise", "--packer",
                           "balanced", "-o", Path(tmp, "b.json"))
            self.assertNotIn("warning: ", balanced.stderr)
            self.assertEqual(run("plan", m, "--dp", "8", "--strategy", "layerwise", "-q", "-o",
                                 Path(tmp, "q.json")).stderr, "")

    def test_a_matrix_too_large_for_its_shards_is_named_as_the_cause(self):
        # 64 matrices of 4096 x 4096 and one of 4096 x 65536 at dp 64: each shard of the big
        # one's bucket holds 2^28 elements, 64 x 2^28 in all for 2^30 + 2^28 of params.
        with tempfile.TemporaryDirectory() as tmp:
            params = [(f"decoder.layers.{i}.w", [4096, 4096], "bfloat16") for i in range(64)]
            params.append(("decoder.layers.64.big", [65536, 4096], "bfloat16"))
            m = manifest_file(tmp, *params)
            result = run("plan", m, "--dp", "64", "--strategy", "layerwise", "--bucket-size",
                         "none", "-o", Path(tmp, "l.json"))
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn('"decoder.layers.64.big" has 268,435,456 elements', result.stderr)
            self.assertIn("over 64 ranks, a bucket holding it has at least 17,179,869,184 "
                          "elements", result.stderr)
            # (2^30 + 2^28) / 2^28 = 5 ranks' shards can be filled.
            self.assertIn("that buffer over at most 5 ranks", result.stderr)
            stats = run("stats", Path(tmp, "l.json"), "--manifest", m)
            self.assertIn("a rank's shard of a bucket holds whole matrices", stats.stderr)


class Traffic(unittest.TestCase):
    def test_layerwise_reduce_scatter_and_all_gather(self):
        with tempfile.TemporaryDirectory() as tmp:
            m = manifest_file(tmp, *TWO_MATRICES)
            t = stats_json(planned(tmp, m, *LAYERWISE_DP2), m)["traffic_per_step"]
            # One bucket of 16384 bf16 elements each way; a ring over 2 ranks sends half of
            # each: (32768 + 32768) / 2; a quarter of it padding.
            self.assertEqual((t["reduce_scatter_bytes"], t["all_gather_bytes"],
                              t["all_reduce_bytes"]), (32768, 32768, 0))
            self.assertEqual((t["sent_bytes"], t["padding_sent_bytes"]), (32768, 8192))
            [b] = t["buffers"]
            self.assertEqual((b["buffer"], b["ranks"], b["buckets"], b["smallest_bucket"],
                              b["largest_bucket"]),
                             ("bfloat16/bfloat16 layerwise", 2, 1, 16384, 16384))

    def test_float32_grads_double_the_reduce_scatter(self):
        with tempfile.TemporaryDirectory() as tmp:
            m = manifest_file(tmp, *TWO_MATRICES)
            layout = planned(tmp, m, *LAYERWISE_DP2, "--grad-reduce-in-fp32")
            t = stats_json(layout, m)["traffic_per_step"]
            # 16384 x 4 bytes reduce-scattered, 16384 x 2 all-gathered; half of each sent.
            self.assertEqual((t["reduce_scatter_bytes"], t["all_gather_bytes"]), (65536, 32768))
            self.assertEqual((t["sent_bytes"], t["padding_sent_bytes"]), (49152, 12288))

    def test_sequential_dp_over_three_ranks(self):
        with tempfile.TemporaryDirectory() as tmp:
            m = manifest_file(tmp, ("w", [1000], "float32"))
            t = stats_json(planned(tmp, m, "--dp", "3"), m)["traffic_per_step"]
            # 1000 elements padded to a multiple of lcm(3, 128) = 384: 1152, 152 of padding.
            # Each collective moves 1152 x 4 = 4608 bytes; a rank sends 2/3 of each: 6144,
            # of which 152/1152 is padding: 810.67, rounded down.
            self.assertEqual((t["reduce_scatter_bytes"], t["all_gather_bytes"]), (4608, 4608))
            self.assertEqual((t["sent_bytes"], t["padding_sent_bytes"]), (6144, 810))

    def test_unpadded_all_reduces(self):
        with tempfile.TemporaryDirectory() as tmp:
            m = manifest_file(tmp, *TWO_MATRICES)
            layout = planned(tmp, m, "--dp", "4", "--strategy", "unpadded")
            t = stats_json(layout, m)["traffic_per_step"]
            # 12288 bf16 elements all-reduced over 4 ranks: a ring sends 2 x 3/4 of them.
            self.assertEqual((t["reduce_scatter_bytes"], t["all_gather_bytes"],
                              t["all_reduce_bytes"]), (0, 0, 24576))
            self.assertEqual((t["sent_bytes"], t["padding_sent_bytes"]), (36864, 0))
            text = run("stats", layout, "--manifest", m).stdout
            self.assertIn("per step, each rank: all-reduces 24.00 KiB, sends 36.00 KiB", text)

    def test_an_estimate_needs_a_link_speed_and_says_it_is_one(self):
        with tempfile.TemporaryDirectory() as tmp:
            m = manifest_file(tmp, *TWO_MATRICES)
            layout = planned(tmp, m, *LAYERWISE_DP2)
            self.assertNotIn("estimate", run("stats", layout, "--manifest", m).stdout)
            # 32768 bytes at 400 Gb/s: 32768 x 8 / 4e11 s.
            s = stats_json(layout, m, "--link-gbps", "400")
            self.assertEqual(s["estimate"]["link_gbps"], 400)
            self.assertAlmostEqual(s["estimate"]["seconds"], 32768 * 8 / 4e11, delta=1e-12)
            text = run("stats", layout, "--manifest", m, "--link-gbps", "400").stdout
            self.assertIn("estimate: 6.55e-07 s of collectives per step at 400 Gb/s per rank "
                          "(ring model, bandwidth only)", text)
            plan = run("plan", m, *LAYERWISE_DP2, "--link-gbps", "400", "-o", "-")
            self.assertIn("estimate: 6.55e-07 s", plan.stderr)
            for bad in ("0", "-1", "nan", "inf", "fast"):
                result = run("stats", layout, "--manifest", m, "--link-gbps", bad)
                self.assertEqual(result.returncode, 2, bad)
                self.assertIn("--link-gbps", result.stderr)

    def test_the_summary_and_the_stats_table_show_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            m = manifest_file(tmp, *TWO_MATRICES)
            layout = planned(tmp, m, *LAYERWISE_DP2)
            text = run("stats", layout, "--manifest", m).stdout
            self.assertEqual(text.splitlines()[0], f"{layout}: layerwise (megatron packer), dp 2")
            self.assertIn("per step, each rank: reduce-scatters 32.00 KiB, all-gathers "
                          "32.00 KiB, sends 32.00 KiB (25.00% padding)", text)
            row = next(line for line in text.splitlines()
                       if line.startswith("  bfloat16/bfloat16 layerwise"))
            self.assertEqual(row.split()[2:], ["2", "1", "16.38k", "32.00", "KiB", "32.00", "KiB",
                                               "32.00", "KiB", "25.00%"])


class Diff(unittest.TestCase):
    def test_option_changes_come_first(self):
        m = ROOT / "testdata/manifests/llama3-8b.json"
        with tempfile.TemporaryDirectory() as tmp:
            a = planned(tmp, m, "--dp", "16", name="a.json")
            b = planned(tmp, m, "--dp", "24", "--grad-reduce-in-fp32", "--bucket-size", "none",
                        name="b.json")
            result = run("diff", a, b, "--limit", "1")
            self.assertEqual(result.returncode, 1)
            lines = result.stdout.splitlines()
            self.assertTrue(lines[0].startswith("options changed: dp, expert_dp, bucket_size, "
                                                "grad_reduce_in_fp32; "), lines[0])
            options = lines.index("options:")
            self.assertEqual(lines[options + 1:options + 5], [
                "  dp                   16 -> 24", "  expert_dp            16 -> 24",
                "  bucket_size          40,000,000 -> none",
                "  grad_reduce_in_fp32  false -> true"])
            self.assertLess(options, next(i for i, l in enumerate(lines) if "buffer" in l))
            j = json.loads(run("diff", a, b, "--json").stdout)
            self.assertEqual(j["options"][0], {"option": "dp", "before": 16, "after": 24})
            self.assertEqual(j["options"][2], {"option": "bucket_size", "before": 40000000,
                                               "after": None})
            self.assertEqual(j["warnings"], [])

    def test_an_option_alone_makes_layouts_differ(self):
        m = ROOT / "testdata/manifests/llama3-8b.json"
        with tempfile.TemporaryDirectory() as tmp:
            a = planned(tmp, m, "--dp", "8", name="a.json")
            b = planned(tmp, m, "--dp", "8", "--packer", "balanced", name="b.json")
            result = run("diff", a, b)
            self.assertEqual(result.returncode, 1)
            self.assertEqual(result.stdout.splitlines()[0], "options changed: packer")
            self.assertIn("  packer  megatron -> balanced", result.stdout)

    def test_other_models_and_manifests_are_warned_about(self):
        with tempfile.TemporaryDirectory() as tmp:
            qwen = Path(tmp, "qwen.json")
            self.assertEqual(run("synth", ROOT / "testdata/configs/qwen2.5-7b.json", "-q", "-o",
                                 qwen).returncode, 0)
            a = planned(tmp, ROOT / "testdata/manifests/llama3-8b.json", "--dp", "16",
                        name="a.json")
            b = planned(tmp, qwen, "--dp", "16", name="b.json")
            text = run("diff", a, b).stdout
            self.assertIn('warning: different models: "llama3-8b" and "qwen2.5-7b"', text)
            self.assertIn("warning: planned from different manifests (sha256 ", text)
            j = json.loads(run("diff", a, b, "--json").stdout)
            self.assertEqual(len(j["warnings"]), 2)
            self.assertTrue(j["warnings"][0].startswith("different models"))


class CheckStats(unittest.TestCase):
    def test_a_hand_edited_stats_member_is_broken(self):
        m = ROOT / "testdata/manifests/llama3-8b.json"
        with tempfile.TemporaryDirectory() as tmp:
            layout = planned(tmp, m, "--dp", "8", "--strategy", "layerwise")
            self.assertEqual(run("check", layout, "--manifest", m).returncode, 0)
            data = json.loads(layout.read_text())
            stats = data["stats"]
            edits = [("padding_percent", 0.0, "/stats/padding_percent is 0.0, the layout gives"),
                     ("bytes_per_rank", {"params": 1, "grads": stats["bytes_per_rank"]["grads"]},
                      "/stats/bytes_per_rank/params is 1, the layout gives"),
                     ("traffic_per_step", "x", "/stats/traffic_per_step is \"x\", the layout "
                                               "gives an object")]
            for key, value, message in edits:
                with self.subTest(key):
                    edited = json.loads(json.dumps(data))
                    edited["stats"][key] = value
                    layout.write_text(json.dumps(edited, indent=1))
                    result = run("check", layout, "--manifest", m)
                    self.assertEqual(result.returncode, 1, result.stdout)
                    self.assertIn(message, result.stdout)
            # Reformatted, with keys it does not know or without some: still holds.
            kept = json.loads(json.dumps(data))
            kept["stats"]["note"] = "by hand"
            del kept["stats"]["traffic_per_step"]
            layout.write_text(json.dumps(kept, indent=4))
            self.assertEqual(run("check", layout, "--manifest", m).returncode, 0)
            del kept["stats"]
            layout.write_text(json.dumps(kept))
            self.assertEqual(run("check", layout, "--manifest", m).returncode, 0)


class OutputRule(unittest.TestCase):
    MANIFEST = ROOT / "testdata/manifests/llama3-8b.json"

    def test_several_manifests_need_a_directory(self):
        with tempfile.TemporaryDirectory() as tmp:
            one = Path(tmp, "one.json")
            one.write_bytes(self.MANIFEST.read_bytes())
            result = run("plan", self.MANIFEST, one, "--dp", "8", "-o", Path(tmp, "q72.json"))
            self.assertEqual(result.returncode, 2)
            self.assertIn("several manifests need -o DIR/", result.stderr)
            self.assertFalse(Path(tmp, "q72.json").exists())
            result = run("plan", self.MANIFEST, one, "--dp", "8", "-q", "-o", f"{tmp}/out/")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(sorted(os.listdir(Path(tmp, "out"))),
                             ["llama3-8b.layout.json", "one.layout.json"])

    def test_a_directory_is_a_directory_for_one_manifest_too(self):
        with tempfile.TemporaryDirectory() as tmp:
            result = run("plan", self.MANIFEST, "--dp", "8", "-q", "-o", f"{tmp}/new/deep/")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertTrue(Path(tmp, "new/deep/llama3-8b.layout.json").is_file())
            Path(tmp, "existing").mkdir()
            result = run("plan", self.MANIFEST, "--dp", "8", "-q", "-o", Path(tmp, "existing"))
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertTrue(Path(tmp, "existing/llama3-8b.layout.json").is_file())
            result = run("plan", "-", "--dp", "8", "-q", "-o", f"{tmp}/stdin/",
                         stdin=self.MANIFEST.read_text())
            self.assertEqual(result.returncode, 2)
            self.assertIn("'-' (stdin) has no name", result.stderr)
            Path(tmp, "file").write_text("x")
            result = run("plan", self.MANIFEST, "--dp", "8", "-q", "-o", f"{tmp}/file/")
            self.assertEqual(result.returncode, 2)
            self.assertIn("a file of that name is in the way", result.stderr)

    def test_synth_writes_model_json_into_a_directory(self):
        with tempfile.TemporaryDirectory() as tmp:
            result = run("synth", ROOT / "testdata/configs/llama3-8b.json", "--tp", "2", "-q",
                         "-o", f"{tmp}/manifests/")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(os.listdir(Path(tmp, "manifests")), ["llama3-8b-tp2.json"])


class CommandLine(unittest.TestCase):
    CONFIG = ROOT / "testdata/configs/gpt2.json"

    def test_dtypes_as_torch_and_megatron_write_them(self):
        for given, dtype in [("bf16", "bfloat16"), ("BF16", "bfloat16"), ("fp16", "float16"),
                             ("half", "float16"), ("fp32", "float32"), ("float", "float32"),
                             ("torch.bfloat16", "bfloat16"), ("float16", "float16")]:
            with self.subTest(given):
                result = run("synth", self.CONFIG, "--dtype", given, "-q")
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertEqual({p["dtype"] for p in json.loads(result.stdout)["params"]},
                                 {dtype})
        result = run("synth", self.CONFIG, "--dtype", "fp8")
        self.assertEqual(result.returncode, 2)
        self.assertIn("expected bfloat16 (bf16), float16 (fp16, half) or float32", result.stderr)

    def test_dash_is_stdout_for_synth_plan_and_render(self):
        synth = run("synth", self.CONFIG, "-o", "-")
        self.assertEqual(synth.returncode, 0, synth.stderr)
        self.assertEqual(json.loads(synth.stdout)["model"], "gpt2")
        self.assertIn("gpt2: GPT2LMHeadModel", synth.stderr)
        plan = run("plan", "-", "--dp", "2", "-o", "-", stdin=synth.stdout)
        self.assertEqual(plan.returncode, 0, plan.stderr)
        self.assertEqual(json.loads(plan.stdout)["options"]["dp"], 2)
        self.assertIn("gpt2: 148 params -> sequential-dp", plan.stderr)
        from_stdin = run("synth", "-", "-q", stdin=self.CONFIG.read_text())
        self.assertEqual(json.loads(from_stdin.stdout)["model"], "model")


if __name__ == "__main__":
    OutputRule.MANIFEST = ROOT / "testdata/manifests/llama3-8b.json"
    CommandLine.CONFIG = ROOT / "testdata/configs/gpt2.json"
    main()
