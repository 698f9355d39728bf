#!/usr/bin/env python3
"""CLI tests of `stats JOB` and `render JOB`: a job's table read back from its files (the
table `job` printed, rows against job.json's own figures and the layouts' buffers, param
elements against a hand count), its JSON, a tampered chunk refused by name, and one picture of
a 1,024-GPU DeepSeek-V3 job: well-formed, a row per stage, bars to scale, under 2 MB.

Usage: job_stats_tests.py PARAMLAYOUT SOURCE_ROOT
"""
import json
import re
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from harness import ROOT, main, run

NS = "{http://www.w3.org/2000/svg}"

DEEPSEEK_ARGS = ["--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "16",
                 "--expert-model-parallel-size", "64",
                 "--pipeline-model-parallel-layout", "Et*3|(tt|)*29m|L",
                 "--mtp-num-layers", "1", "--bf16", "--use-distributed-optimizer",
                 "--overlap-grad-reduce", "--moe-grouped-gemm"]

# A GPT small enough to count by hand: 2 layers of hidden 64, 4 heads, ffn 4 x 64, biases,
# learned absolute positions, tied embeddings; vocab 1000 padded to 1024.
SMALL = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--vocab-size", "1000", "--max-position-embeddings", "64", "--seq-length", "64"]


def human_bytes(n):
    """text.cpp's rule, written again: 1024-based units, two decimals."""
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    value, unit = float(n), 0
    while value >= 1024 and unit + 1 < len(units):
        value, unit = value / 1024, unit + 1
    return f"{value:.0f} B" if unit == 0 else f"{value:.2f} {units[unit]}"


def table(text):
    """The job table: from its header row to the line after the heaviest stage."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.split()[:3] == ["stage", "chunk", "builds"])
    end = next(i for i, l in enumerate(lines) if l.startswith("  heaviest stage: "))
    return lines[start:end + 2]


def total(b):
    return b["params"] + b["grads"] + b["optimizer"]


def layout_padding(layout):
    """Padding and param elements of a layout, from its buffers: numel less the params'."""
    params = sum(p["end"] - p["start"] for b in layout["buffers"] for p in b["params"])
    numel = sum(b["numel"] for b in layout["buffers"])
    return numel - params, params


class Job:
    """A job written to a temporary directory, with what `job` printed."""

    def __init__(self, tmp, name, world, *args, hf_config=None):
        self.dir = Path(tmp, name)
        extra = ["--hf-config", hf_config] if hf_config else []
        self.result = run("job", "--world-size", world, *extra, "-o", self.dir, "--", *args)
        assert self.result.returncode == 0, self.result.stderr
        self.record = json.loads((self.dir / "job.json").read_text())

    def layout(self, chunk):
        return json.loads((self.dir / chunk["layout"]).read_text())


class StatsJob(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.deepseek = Job(cls.tmp.name, "ds3", 1024, *DEEPSEEK_ARGS,
                           hf_config=ROOT / "testdata/configs/deepseek-v3.json")
        cls.small = Job(cls.tmp.name, "small", 8, *SMALL, "--pipeline-model-parallel-size", "2",
                        "--bf16", "--use-distributed-optimizer")
        # Mixtral with the precision-aware optimizer: 6 bytes of state per element, not the
        # 12 a layout alone implies.
        cls.mixtral = Job(cls.tmp.name, "mixtral", 64, "--tensor-model-parallel-size", "2",
                          "--pipeline-model-parallel-size", "4", "--expert-model-parallel-size",
                          "8", "--bf16", "--use-distributed-optimizer",
                          "--use-precision-aware-optimizer", "--main-grads-dtype", "bf16",
                          "--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "bf16",
                          hf_config=ROOT / "testdata/configs/mixtral-8x7b.json")

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def stats(self, *args):
        result = run("stats", *args)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    def test_the_table_job_printed(self):
        for job in (self.deepseek, self.small, self.mixtral):
            with self.subTest(job.dir.name):
                printed = table(job.result.stdout)
                self.assertEqual(table(self.stats(job.dir)), printed)
                self.assertEqual(table(self.stats(job.dir / "job.json")), printed)

    def test_rows_are_job_json_figures(self):
        for job in (self.deepseek, self.small, self.mixtral):
            with self.subTest(job.dir.name):
                rows = [l.split() for l in table(self.stats(job.dir))[1:-2]]
                chunk_rows = [r for r in rows if r[1] != "all"]
                self.assertEqual(len(chunk_rows), len(job.record["chunks"]))
                for row, c in zip(chunk_rows, job.record["chunks"]):
                    self.assertEqual((int(row[0]), int(row[1])), (c["stage"], c["chunk"]))
                    b = c["bytes_per_rank"]
                    figures = [f"{int(x):,}" for x in [c["param_elements"]]] + [
                        human_bytes(v) for v in (b["params"], b["grads"], b["optimizer"], total(b))]
                    joined = " ".join(row)
                    for figure in figures:
                        self.assertIn(figure, joined)
                    padding, params = layout_padding(job.layout(c))
                    self.assertIn(f"{100 * padding / (padding + params):.2f}%", row)

    def test_the_heaviest_stage_is_the_largest_sum(self):
        for job in (self.deepseek, self.small, self.mixtral):
            with self.subTest(job.dir.name):
                sums = {}
                for c in job.record["chunks"]:
                    for key, value in c["bytes_per_rank"].items():
                        sums.setdefault(c["stage"], {}).setdefault(key, 0)
                        sums[c["stage"]][key] += value
                heaviest = max(sums, key=lambda s: (total(sums[s]), -s))
                b = sums[heaviest]
                self.assertIn(f"  heaviest stage: {heaviest}, {human_bytes(total(b))} per rank "
                              f"(params {human_bytes(b['params'])}, grads "
                              f"{human_bytes(b['grads'])}, optimizer state "
                              f"{human_bytes(b['optimizer'])})", self.stats(job.dir))

    def test_param_elements_by_hand(self):
        # Layer: fused norms 2 x (64 + 64), qkv 3 x 64 x 64 + 192, proj 64 x 64 + 64,
        # fc1 256 x 64 + 256, fc2 64 x 256 + 64.
        layer = 2 * 128 + 3 * 64 * 64 + 192 + 64 * 64 + 64 + 256 * 64 + 256 + 64 * 256 + 64
        words, positions, final_norm = 1024 * 64, 64 * 64, 128
        first = words + positions + layer
        last = layer + final_norm + words  # the tied output weight is the last stage's copy
        rows = [l.split() for l in table(self.stats(self.small.dir))[1:-2]]
        self.assertEqual([r[:2] for r in rows], [["0", "0"], ["1", "0"]])
        self.assertIn(f"{first:,}", rows[0])
        self.assertIn(f"{last:,}", rows[1])

    def test_optimizer_state_is_the_jobs(self):
        # stats of one chunk charges a layout's default (12 bytes per element); the job's
        # optimizer keeps 6, as job.json records.
        c = self.mixtral.record["chunks"][0]
        alone = json.loads(self.stats(self.mixtral.dir / c["layout"], "--manifest",
                                      self.mixtral.dir / c["manifest"], "--json"))
        in_job = json.loads(self.stats(self.mixtral.dir, "--json"))["chunks"][0]
        self.assertNotEqual(alone["bytes_per_rank"]["optimizer"],
                            c["bytes_per_rank"]["optimizer"])
        self.assertEqual(in_job["bytes_per_rank"], c["bytes_per_rank"])

    def test_traffic_per_step_by_stage(self):
        out = self.stats(self.deepseek.dir)
        self.assertIn("per step, each rank of a stage:", out)
        s = json.loads(self.stats(self.deepseek.dir, "--json"))
        busiest = s["busiest_stage"]
        self.assertIn(f"most traffic: stage {busiest['stage']}, each rank sends "
                      f"{human_bytes(busiest['sent_bytes'])} per step", out)

    def test_json(self):
        for job in (self.deepseek, self.small):
            with self.subTest(job.dir.name):
                s = json.loads(self.stats(job.dir, "--json", "--link-gbps", "100"))
                for key in ("model", "world_size", "tp", "pp", "vpp", "cp", "ep", "etp", "dp",
                            "expert_dp", "strategy", "param_dtype", "grad_dtype", "chunks",
                            "stages", "heaviest_stage", "busiest_stage", "totals"):
                    self.assertIn(key, s)
                for key in ("world_size", "tp", "pp", "vpp", "cp", "ep", "etp", "dp",
                            "expert_dp", "strategy", "packer", "param_dtype", "grad_dtype",
                            "dense_shards", "expert_shards"):
                    self.assertEqual(s[key], job.record[key], key)
                self.assertEqual(len(s["chunks"]), len(job.record["chunks"]))
                self.assertEqual(len(s["stages"]), job.record["pp"])
                for got, c in zip(s["chunks"], job.record["chunks"]):
                    self.assertEqual((got["stage"], got["chunk"]), (c["stage"], c["chunk"]))
                    self.assertEqual(got["bytes_per_rank"], c["bytes_per_rank"])
                    padding, params = layout_padding(job.layout(c))
                    self.assertEqual((got["padding"], got["param_elements"]), (padding, params))
                # Each chunk's object holds every key `stats --json` gives for it alone.
                c = job.record["chunks"][-1]
                alone = json.loads(self.stats(job.dir / c["layout"], "--manifest",
                                              job.dir / c["manifest"], "--json", "--link-gbps",
                                              "100"))
                mine = s["chunks"][-1]
                self.assertEqual(list(mine)[:3], ["stage", "chunk", "builds"])
                self.assertEqual(list(mine)[3:], list(alone))
                for key in alone:
                    if key != "bytes_per_rank":
                        self.assertEqual(mine[key], alone[key], key)
                # Stages are their chunks together; the heaviest and the busiest the largest.
                for stage in s["stages"]:
                    chunks = [c for c in s["chunks"] if c["stage"] == stage["stage"]]
                    for key in ("params", "grads", "optimizer"):
                        self.assertEqual(stage["bytes_per_rank"][key],
                                         sum(c["bytes_per_rank"][key] for c in chunks))
                    self.assertEqual(stage["traffic_per_step"]["sent_bytes"],
                                     sum(c["traffic_per_step"]["sent_bytes"] for c in chunks))
                heaviest = max(s["stages"], key=lambda st: total(st["bytes_per_rank"]))
                self.assertEqual(s["heaviest_stage"]["stage"], heaviest["stage"])
                self.assertEqual(s["heaviest_stage"]["stage"],
                                 job.record["heaviest_stage"]["stage"])
                busiest = max(s["stages"], key=lambda st: st["traffic_per_step"]["sent_bytes"])
                self.assertEqual(s["busiest_stage"]["stage"], busiest["stage"])
                self.assertEqual(s["totals"]["param_elements"],
                                 sum(c["param_elements"] for c in s["chunks"]))

    def test_a_tampered_chunk_is_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            job = Job(tmp, "job", 8, *SMALL, "--pipeline-model-parallel-size", "2", "--bf16",
                      "--use-distributed-optimizer")
            layout = job.dir / job.record["chunks"][1]["layout"]
            layout.write_text(layout.read_text().replace('"numel"', ' "numel"', 1))
            for command in (["stats", job.dir], ["stats", job.dir / "job.json", "--json"],
                            ["render", job.dir, "-o", Path(tmp, "job.svg")]):
                with self.subTest(command[0]):
                    result = run(*command)
                    self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
                    self.assertIn("stage1.chunk0: stage1.chunk0.layout.json is not the file "
                                  "job.json names", result.stderr)
                    self.assertEqual(result.stdout, "")
            self.assertFalse(Path(tmp, "job.svg").exists())

    def test_manifest_is_for_layouts_only(self):
        c = self.small.record["chunks"][0]
        result = run("stats", self.small.dir, "--manifest", self.small.dir / c["manifest"])
        self.assertEqual(result.returncode, 2)
        self.assertIn("is a job, whose chunks name their own manifests; drop --manifest",
                      result.stderr)
        result = run("stats", self.small.dir / c["layout"])
        self.assertEqual(result.returncode, 2)
        self.assertIn("--manifest is required: ", result.stderr)

    def test_not_a_job_directory(self):
        with tempfile.TemporaryDirectory() as tmp:
            for command in ("stats", "render"):
                result = run(command, tmp)
                self.assertEqual(result.returncode, 2)
                self.assertIn("not a job directory: it holds no job.json", result.stderr)


class RenderJob(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.job = Job(cls.tmp.name, "ds3", 1024, *DEEPSEEK_ARGS,
                      hf_config=ROOT / "testdata/configs/deepseek-v3.json")
        cls.out = Path(cls.tmp.name, "pictures/")
        cls.result = run("render", cls.job.dir, "-o", f"{cls.out}/")
        cls.svg = cls.out / "job.svg"

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)
        self.root = ElementTree.parse(self.svg).getroot()  # well-formed XML
        self.rects = list(self.root.iter(NS + "rect"))

    def titles(self, css):
        return [r.find(NS + "title").text for r in self.rects
                if css in r.get("class", "").split() and r.find(NS + "title") is not None]

    def test_under_2_mb(self):
        self.assertLess(self.svg.stat().st_size, 2_000_000)

    def test_a_row_per_stage(self):
        labels = [t.text for t in self.root.iter(NS + "text")
                  if re.fullmatch(r"stage \d+", t.text or "")]
        self.assertEqual(labels, [f"stage {s}" for s in range(16)])
        ys = [float(t.get("y")) for t in self.root.iter(NS + "text")
              if re.fullmatch(r"stage \d+", t.text or "")]
        self.assertEqual(ys, sorted(ys))

    def test_every_chunks_buffers_are_drawn(self):
        named = {re.match(r"(stage\d+\.chunk\d+) buffer (\d+)", t).groups()
                 for t in self.titles("pad") if t and t.startswith("stage")}
        expected = {(f"stage{c['stage']}.chunk{c['chunk']}", str(i))
                    for c in self.job.record["chunks"]
                    for i in range(len(self.job.layout(c)["buffers"]))}
        self.assertEqual(named, expected)

    def test_memory_bars_at_the_heaviest_stages_scale(self):
        widths = {}
        for css in ("mp", "mg", "mo"):
            bars = [r for r in self.rects if r.get("class") == css]
            self.assertEqual(len(bars), 16, css)
            widths[css] = [float(r.get("width")) for r in bars]
        drawn = [sum(w) for w in zip(*widths.values())]
        sums = {}
        for c in self.job.record["chunks"]:
            sums[c["stage"]] = sums.get(c["stage"], 0) + total(c["bytes_per_rank"])
        heaviest = max(sums.values())
        full = max(drawn)
        for stage, width in enumerate(drawn):
            self.assertAlmostEqual(width / full, sums[stage] / heaviest, delta=0.002)
        self.assertAlmostEqual(full, 1084, delta=1)  # the plot's width

    def test_colours_are_in_the_legend(self):
        used = {c for r in self.rects for c in r.get("class", "").split()
                if re.fullmatch(r"c\d+", c) and "sw" not in r.get("class", "")}
        legend = {c for r in self.rects if "sw" in r.get("class", "").split()
                  for c in r.get("class", "").split() if re.fullmatch(r"c\d+", c)}
        self.assertTrue(used)
        self.assertEqual(used, legend)

    def test_the_embedding_and_the_output_layer_are_drawn(self):
        params = " ".join(self.titles("p"))
        self.assertIn("embedding.word_embeddings.weight", params)
        self.assertIn("output_layer.weight", params)
        self.assertIn("layer 60", params)

    def test_stdout_and_job_json(self):
        result = run("render", self.job.dir / "job.json")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, self.svg.read_text())


if __name__ == "__main__":
    main()
