#!/usr/bin/env python3
"""CLI tests: run the built paramlayout binary on testdata/ and on crafted bad inputs.

Usage: run_cli_tests.py PARAMLAYOUT SOURCE_ROOT
"""
import json
import os
import tempfile
import unittest
from pathlib import Path

from harness import ROOT, main, run


class BadInputs(unittest.TestCase):
    """Every malformed manifest or option exits 2 with a message that locates the problem."""

    def test_bad_inputs(self):
        cases = json.loads((ROOT / "tests/cli/bad_inputs.json").read_text())
        self.assertGreaterEqual(len(cases), 25)
        for case in cases:
            with self.subTest(case["name"]), tempfile.TemporaryDirectory() as tmp:
                manifest = case.get("manifest_path", "manifest.json")
                if "manifest_bytes" in case:  # one byte per character, for invalid UTF-8
                    Path(tmp, manifest).write_bytes(case["manifest_bytes"].encode("latin-1"))
                elif "manifest_text" in case:
                    Path(tmp, manifest).write_text(case["manifest_text"])
                elif "manifest" in case:
                    Path(tmp, manifest).write_text(json.dumps(case["manifest"]))
                before = sorted(os.listdir(tmp))
                result = run("plan", manifest, *case.get("args", ["--dp", "8"]), cwd=tmp)
                self.assertEqual(result.returncode, 2, result.stderr)
                self.assertEqual(result.stdout, "", "no partial output on stdout")
                for expected in case["stderr"]:
                    self.assertIn(expected, result.stderr)
                self.assertNotIn("terminate called", result.stderr)
                self.assertNotIn("Traceback", result.stderr)
                self.assertEqual(sorted(os.listdir(tmp)), before, "no file left behind")


class Plan(unittest.TestCase):
    MANIFEST = ROOT / "testdata/manifests/llama3-8b.json"

    def test_layout_on_stdout_summary_on_stderr(self):
        result = run("plan", self.MANIFEST, "--dp", "8")
        self.assertEqual(result.returncode, 0, result.stderr)
        layout = json.loads(result.stdout)
        self.assertEqual(layout["schema"], "paramlayout.layout/v1")
        self.assertIn("bfloat16/bfloat16", result.stderr)
        self.assertIn("padding", result.stderr)

    def test_output_file_puts_summary_on_stdout(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "layout.json")
            result = run("plan", self.MANIFEST, "--dp", "8", "-o", out)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("bfloat16/bfloat16", result.stdout)
            self.assertEqual(json.loads(out.read_text())["options"]["dp"], 8)
            self.assertEqual(os.listdir(tmp), ["layout.json"])

    def test_failed_run_leaves_existing_output_untouched(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "layout.json")
            out.write_text("precious")
            bad = Path(tmp, "bad.json")
            bad.write_text('{"schema": "paramlayout.manifest/v1", "params": [{"name": 1}]}')
            result = run("plan", bad, "--dp", "8", "-o", out)
            self.assertEqual(result.returncode, 2)
            self.assertEqual(out.read_text(), "precious")
            self.assertEqual(sorted(os.listdir(tmp)), ["bad.json", "layout.json"])

    def test_manifest_sha256_is_of_the_file_bytes(self):
        import hashlib
        result = run("plan", self.MANIFEST, "--dp", "2", "-q")
        self.assertEqual(json.loads(result.stdout)["manifest_sha256"],
                         hashlib.sha256(self.MANIFEST.read_bytes()).hexdigest())

    def test_stdin_manifest(self):
        result = run("plan", "-", "--dp", "4", "-q", stdin=self.MANIFEST.read_text())
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(json.loads(result.stdout)["options"]["dp"], 4)

    def test_default_bucket_size_follows_dp(self):
        for dp, expected in ((8, 40000000), (64, 64000000)):
            result = run("plan", self.MANIFEST, "--dp", dp, "-q")
            self.assertEqual(json.loads(result.stdout)["options"]["bucket_size"], expected)

    def test_bucket_size_none_is_null(self):
        result = run("plan", self.MANIFEST, "--dp", "8", "--bucket-size", "none", "-q")
        layout = json.loads(result.stdout)
        self.assertIsNone(layout["options"]["bucket_size"])
        self.assertEqual([len(b["buckets"]) for b in layout["buffers"]], [1])

    def test_timings_line(self):
        result = run("plan", self.MANIFEST, "--dp", "8", "-q", "--timings")
        self.assertRegex(result.stderr, r"timings: parse [\d.]+ ms, validate [\d.]+ ms, "
                                        r"plan [\d.]+ ms, write [\d.]+ ms, total [\d.]+ ms")

    def test_quiet(self):
        result = run("plan", self.MANIFEST, "--dp", "8", "-q")
        self.assertEqual(result.stderr, "")

    def test_help_and_version_exit_0(self):
        self.assertEqual(run("--help").returncode, 0)
        self.assertEqual(run("plan", "--help").returncode, 0)
        version = run("--version")
        self.assertEqual(version.returncode, 0)
        self.assertIn("paramlayout", version.stdout)
        self.assertIn("(verify: cpu", version.stdout)

    def test_no_subcommand_is_bad_usage(self):
        self.assertEqual(run().returncode, 2)


def planned(tmp, manifest, *args):
    out = Path(tmp, "layout.json")
    result = run("plan", manifest, "-q", "-o", out, *args)
    assert result.returncode == 0, result.stderr
    return out


class Check(unittest.TestCase):
    MANIFEST = Plan.MANIFEST

    def test_pristine_layout_holds(self):
        with tempfile.TemporaryDirectory() as tmp:
            layout = planned(tmp, self.MANIFEST, "--dp", "8", "--strategy", "layerwise")
            result = run("check", layout, "--manifest", self.MANIFEST, "--replan")
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            self.assertIn("holds", result.stdout)
            self.assertIn("a fresh plan gives the same layout", result.stdout)

    def test_every_broken_promise_is_listed(self):
        with tempfile.TemporaryDirectory() as tmp:
            layout = planned(tmp, self.MANIFEST, "--dp", "8", "--strategy", "layerwise")
            data = json.loads(layout.read_text())
            params = data["buffers"][1]["params"]
            params[3]["start"] += 1
            params[3]["end"] += 1
            shifted = params[3]["name"]
            dropped = params.pop(7)["name"]
            data["buffers"][0]["num_shards"] = 7
            layout.write_text(json.dumps(data))
            result = run("check", layout, "--manifest", self.MANIFEST)
            self.assertEqual(result.returncode, 1)
            self.assertIn(f'param "{shifted}": starts at', result.stdout)
            self.assertIn("not a multiple of 64", result.stdout)
            self.assertIn(f'param "{dropped}": is in the manifest but missing', result.stdout)
            self.assertIn("buffer 0 (bfloat16/bfloat16): num_shards is 7, expected 8", result.stdout)
            self.assertRegex(result.stdout.splitlines()[-1], r"broken: \d+ problems")
            limited = run("check", layout, "--manifest", self.MANIFEST, "--limit", "1")
            self.assertIn("more (--limit 0 shows all)", limited.stdout)

    def test_stale_layout_is_caught_by_replan(self):
        with tempfile.TemporaryDirectory() as tmp:
            layout = planned(tmp, self.MANIFEST, "--dp", "8")
            data = json.loads(layout.read_text())
            data["options"]["bucket_size"] = 50000000
            layout.write_text(json.dumps(data))
            self.assertEqual(run("check", layout, "--manifest", self.MANIFEST).returncode, 0)
            result = run("check", layout, "--manifest", self.MANIFEST, "--replan")
            self.assertEqual(result.returncode, 1)
            self.assertIn("stale: ", result.stdout)

    def test_unreadable_inputs_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            layout = planned(tmp, self.MANIFEST, "--dp", "8")
            result = run("check", self.MANIFEST, "--manifest", self.MANIFEST)
            self.assertEqual(result.returncode, 2)
            self.assertIn("this file is a manifest, not a layout", result.stderr)
            result = run("check", layout, "--manifest", Path(tmp, "missing.json"))
            self.assertEqual(result.returncode, 2)
            self.assertIn("missing.json: cannot open", result.stderr)
            self.assertEqual(run("check", layout).returncode, 2)


class Diff(unittest.TestCase):
    def test_one_more_layer(self):
        with tempfile.TemporaryDirectory() as tmp:
            old = planned(tmp, Plan.MANIFEST, "--dp", "16")
            old = old.rename(Path(tmp, "old.json"))
            new = planned(tmp, ROOT / "testdata/manifests/llama3-8b-33-layers.json", "--dp", "16")
            result = run("diff", old, new)
            self.assertEqual(result.returncode, 1)
            self.assertRegex(result.stdout.splitlines()[0], r"^\d+ params moved, 6 added")
            self.assertIn("added (6):", result.stdout)
            j = json.loads(run("diff", old, new, "--json").stdout)
            self.assertFalse(j["identical"])
            self.assertEqual(len(j["added"]), 6)
            for key in ("removed", "resized", "moved", "owner_changed"):
                self.assertIsInstance(j[key], list)

    def test_identical_and_dp_change(self):
        with tempfile.TemporaryDirectory() as tmp:
            a = planned(tmp, Plan.MANIFEST, "--dp", "16").rename(Path(tmp, "a.json"))
            result = run("diff", a, a)
            self.assertEqual((result.returncode, result.stdout), (0, "identical\n"))
            b = planned(tmp, Plan.MANIFEST, "--dp", "24")
            result = run("diff", a, b, "--json")
            self.assertEqual(result.returncode, 1)
            self.assertGreater(json.loads(result.stdout)["owner_changed_elements"], 0)

    def test_bad_input_exits_2(self):
        result = run("diff", Plan.MANIFEST, Plan.MANIFEST)
        self.assertEqual(result.returncode, 2)
        self.assertIn("not a layout", result.stderr)


def no_gpu_reason():
    """Why the nccl backend cannot run here, or None when it can."""
    with tempfile.TemporaryDirectory() as tmp:
        m = ROOT / "testdata/reference/manifests/random-1001.json"
        result = run("verify", planned(tmp, m, "--dp", "2"), "--manifest", m, "--backend", "nccl",
                     "-q")
        return result.stderr.strip() if result.returncode == 2 else None


class Verify(unittest.TestCase):
    MANIFEST = ROOT / "testdata/reference/manifests/random-1001.json"

    def layout(self, tmp, *args):
        return planned(tmp, self.MANIFEST, *(args or ("--dp", "8", "--strategy", "layerwise")))

    def test_verified_on_cpu_with_a_table(self):
        with tempfile.TemporaryDirectory() as tmp:
            result = run("verify", self.layout(tmp), "--manifest", self.MANIFEST, "--backend", "cpu")
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            self.assertIn("data pass on cpu, 2 simulated devices", result.stdout)
            header = next(line for line in result.stdout.splitlines() if "#wrong" in line)
            for column in ("buffer", "bucket", "ranks", "elements", "time ms", "algbw GB/s",
                           "busbw GB/s"):
                self.assertIn(column, header)
            self.assertRegex(result.stdout.splitlines()[-1], r": verified: \d+ buckets")

    def test_report_json(self):
        with tempfile.TemporaryDirectory() as tmp:
            report = Path(tmp, "report.json")
            layout = self.layout(tmp)
            result = run("verify", layout, "--manifest", self.MANIFEST, "--backend", "cpu",
                         "--gpus", "4", "--chunk-elements", "1000", "--report", report, "-q")
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            j = json.loads(report.read_text())
            self.assertTrue(j["ok"])
            self.assertEqual((j["mismatches"], j["violations"]), (0, []))
            numel = sum(b["numel"] for b in json.loads(layout.read_text())["buffers"])
            self.assertEqual(sum(b["elements"] for b in j["buckets"]), numel)
            self.assertTrue(any(b["chunks"] > 1 for b in j["buckets"]))

    def test_broken_layout_exits_1_before_the_data_pass(self):
        with tempfile.TemporaryDirectory() as tmp:
            layout = self.layout(tmp, "--dp", "8")
            data = json.loads(layout.read_text())
            param = data["buffers"][0]["params"][2]
            param["start"] += 1
            param["end"] += 1
            layout.write_text(json.dumps(data))
            report = Path(tmp, "report.json")
            result = run("verify", layout, "--manifest", self.MANIFEST, "--backend", "cpu",
                         "--report", report)
            self.assertEqual(result.returncode, 1)
            self.assertIn(f'param "{param["name"]}": starts at', result.stdout)
            self.assertIn("no data pass", result.stdout)
            self.assertFalse(json.loads(report.read_text())["ok"])

    def test_backend_choice_without_and_with_a_gpu(self):
        reason = no_gpu_reason()
        with tempfile.TemporaryDirectory() as tmp:
            layout = self.layout(tmp)
            auto = run("verify", layout, "--manifest", self.MANIFEST)
            self.assertEqual(auto.returncode, 0, auto.stdout + auto.stderr)
            if reason is None:
                self.assertIn("data pass on nccl", auto.stdout)
                return
            self.assertIn("no CUDA device was found", reason)
            self.assertIn("using the cpu backend", auto.stderr)
            self.assertIn("data pass on cpu", auto.stdout)

    def test_bad_input_exits_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            layout = self.layout(tmp)
            report = Path(tmp, "report.json")
            for args, message in [
                (["--timeout", "0"], "--timeout"),
                (["--gpus", "0"], "--gpus"),
                (["--backend", "tpu"], "--backend"),
                (["--chunk-elements", "-5"], "--chunk-elements"),
            ]:
                with self.subTest(args):
                    result = run("verify", layout, "--manifest", self.MANIFEST, *args)
                    self.assertEqual(result.returncode, 2)
                    self.assertIn(message, result.stderr)
            result = run("verify", layout, "--manifest", Path(tmp, "missing.json"), "--report",
                         report)
            self.assertEqual(result.returncode, 2)
            self.assertIn("missing.json: cannot open", result.stderr)
            self.assertFalse(report.exists(), "no report for unreadable input")
            self.assertEqual(run("verify", self.MANIFEST, "--manifest", self.MANIFEST).returncode, 2)


class Synth(unittest.TestCase):
    def test_config_to_manifest_to_layouts_of_a_pipeline(self):
        config = ROOT / "testdata/configs/llama3-70b.json"
        with tempfile.TemporaryDirectory() as tmp:
            manifests = []
            for stage in range(4):
                out = Path(tmp, f"stage{stage}.json")
                result = run("synth", config, "--tp", "8", "--pp", "4", "--stage", stage, "-o", out)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn(f"llama3-70b-tp8-pp4-stage{stage}: LlamaForCausalLM", result.stdout)
                manifests.append(out)
            first = json.loads(manifests[0].read_text())
            self.assertEqual(first["params"][0]["name"], "embedding.word_embeddings.weight")
            # 128256 padded to a multiple of 128 * tp = 1024 (129024), split 8 ways.
            self.assertEqual(first["params"][0]["shape"], [16128, 8192])
            result = run("plan", *manifests, "--dp", "16", "-o", f"{tmp}/layouts/")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertIn("pipeline: 4 chunks", result.stdout)
            self.assertIn("heaviest: llama3-70b-tp8-pp4-stage", result.stdout)
            for stage in range(4):
                layout = Path(tmp, "layouts", f"stage{stage}.layout.json")
                check = run("check", layout, "--manifest", manifests[stage], "--replan")
                self.assertEqual(check.returncode, 0, check.stdout)

    def test_several_manifests_need_a_directory_and_write_nothing_on_error(self):
        m = ROOT / "testdata/manifests/llama3-8b.json"
        with tempfile.TemporaryDirectory() as tmp:
            result = run("plan", m, m, "--dp", "8")
            self.assertEqual(result.returncode, 2)
            self.assertIn("several manifests need -o DIR", result.stderr)
            result = run("plan", m, m, "--dp", "8", "-o", tmp)
            self.assertEqual(result.returncode, 2)
            self.assertIn("another manifest also makes llama3-8b.layout.json", result.stderr)
            bad = Path(tmp, "bad.json")
            bad.write_text("{}")
            result = run("plan", m, bad, "--dp", "8", "-o", Path(tmp, "out"))
            self.assertEqual(result.returncode, 2)
            self.assertFalse(Path(tmp, "out").exists(), "nothing written when a chunk fails")

    def test_bad_config_and_split_exit_2(self):
        with tempfile.TemporaryDirectory() as tmp:
            config = Path(tmp, "config.json")
            config.write_text('{"architectures": ["T5ForConditionalGeneration"]}')
            result = run("synth", config)
            self.assertEqual(result.returncode, 2)
            self.assertIn('unknown architecture "T5ForConditionalGeneration"', result.stderr)
            result = run("synth", ROOT / "testdata/configs/llama3-8b.json", "--tp", "3")
            self.assertEqual(result.returncode, 2)
            self.assertIn("--tp 3 does not divide the 32 attention heads", result.stderr)
            self.assertEqual(result.stdout, "")


class StatsAndRender(unittest.TestCase):
    def test_stats_of_both_packers(self):
        m = ROOT / "testdata/reference/manifests/mixtral-8x7b-tp2-ep8.json"
        with tempfile.TemporaryDirectory() as tmp:
            figures = {}
            for packer in ("megatron", "balanced"):
                layout = planned(tmp, m, "--dp", "8", "--strategy", "layerwise", "--packer", packer)
                result = run("stats", layout, "--manifest", m, "--json")
                self.assertEqual(result.returncode, 0, result.stderr)
                figures[packer] = json.loads(result.stdout)
                embedded = json.loads(layout.read_text())
                self.assertEqual(embedded["options"]["packer"], packer)
                self.assertEqual(embedded["stats"]["padding"], figures[packer]["padding"])
                text = run("stats", layout, "--manifest", m).stdout
                self.assertIn(f"({packer} packer)", text)
                self.assertIn("per rank: params", text)
            self.assertLess(figures["balanced"]["padding"], figures["megatron"]["padding"])
            self.assertEqual(run("stats", m, "--manifest", m).returncode, 2)

    def svg_of(self, tmp, layout):
        out = Path(tmp, "layout.svg")
        result = run("render", layout, "-o", out)
        self.assertEqual(result.returncode, 0, result.stderr)
        import xml.etree.ElementTree as ElementTree
        return ElementTree.parse(out).getroot(), out

    def test_every_param_is_drawn(self):
        m = ROOT / "testdata/manifests/llama3-8b.json"
        with tempfile.TemporaryDirectory() as tmp:
            layout = planned(tmp, m, "--dp", "8", "--strategy", "layerwise")
            params = {p["name"] for b in json.loads(layout.read_text())["buffers"] for p in b["params"]}
            svg, _ = self.svg_of(tmp, layout)
            ns = "{http://www.w3.org/2000/svg}"
            named, merged = set(), 0
            for rect in svg.iter(ns + "rect"):
                title = rect.find(ns + "title")
                text, kind = (title.text if title is not None else ""), rect.get("class", "")
                if kind.startswith("m ") and " small param" in text:
                    merged += int(text.split()[0])
                elif kind.startswith("p ") and not text.endswith(" continued"):
                    named.add(text.rsplit(" [", 1)[0])
            self.assertFalse(named - params, "only layout params are drawn")
            self.assertEqual(len(named) + merged, len(params))
            self.assertGreater(len(named), 100)

    def test_thirty_thousand_params_stay_small(self):
        with tempfile.TemporaryDirectory() as tmp:
            manifest = Path(tmp, "deepseek.json")
            self.assertEqual(run("synth", ROOT / "testdata/configs/deepseek-v3.json", "-q", "-o",
                                 manifest).returncode, 0)
            layout = planned(tmp, manifest, "--dp", "64", "--strategy", "layerwise")
            svg, path = self.svg_of(tmp, layout)
            self.assertLess(path.stat().st_size, 16 << 20)
            self.assertEqual(svg.tag, "{http://www.w3.org/2000/svg}svg")


class Reference(unittest.TestCase):
    """The binary end to end on Megatron-LM's reference cases (the unit suite covers all)."""

    def test_reference_cases_through_the_binary(self):
        ref = ROOT / "testdata/reference"
        cases = json.loads((ref / "cases.json").read_text())
        keys = ["param_dtype", "grad_dtype", "expert_parallel", "layerwise", "num_shards",
                "numel", "numel_unpadded", "buckets", "params"]
        for case in cases[::7]:
            with self.subTest(case["id"]):
                o = case["options"]
                args = ["plan", ref / case["manifest"], "--dp", o["dp"], "--strategy",
                        o["strategy"], "-q"]
                if "expert_dp" in o:
                    args += ["--expert-dp", o["expert_dp"]]
                if o["bucket_size"] is None:
                    args += ["--bucket-size", "none"]
                elif o["bucket_size"] != "default":
                    args += ["--bucket-size", o["bucket_size"]]
                if o["grad_reduce_in_fp32"]:
                    args.append("--grad-reduce-in-fp32")
                if o["pad_for_high_nccl_busbw"]:
                    args.append("--pad-for-high-nccl-busbw")
                result = run(*args)
                self.assertEqual(result.returncode, 0, result.stderr)
                got = [{k: b[k] for k in keys} for b in json.loads(result.stdout)["buffers"]]
                expected = json.loads((ref / "expected" / f"{case['id']}.json").read_text())
                self.assertEqual(got, expected["buffers"])


if __name__ == "__main__":
    Plan.MANIFEST = Check.MANIFEST = ROOT / "testdata/manifests/llama3-8b.json"
    Verify.MANIFEST = ROOT / "testdata/reference/manifests/random-1001.json"
    main()
