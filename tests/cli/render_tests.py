#!/usr/bin/env python3
"""render at any dp: a well-formed picture that accounts for every param, groups ranks into
readable columns with a rank axis, names every colour it uses and stays small.

Usage: render_tests.py PARAMLAYOUT SOURCE_ROOT
"""
import json
import os
import re
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from harness import ROOT, main, run

NS = "{http://www.w3.org/2000/svg}"


def plan(tmp, manifest, name, *args):
    out = Path(tmp, name)
    result = run("plan", manifest, "-q", "-o", out, *args)
    assert result.returncode == 0, result.stderr
    return out


class Picture:
    """A rendered layout, parsed: its boxes by kind, the legend and the axis labels."""

    def __init__(self, path):
        self.size = path.stat().st_size
        self.root = ElementTree.parse(path).getroot()
        self.named, self.continued, self.merged_params, self.runs = [], 0, 0, 0
        self.colour_classes, self.legend_classes = set(), set()
        for rect in self.root.iter(NS + "rect"):
            classes = set(rect.get("class", "").split())
            title = rect.find(NS + "title")
            text = title.text if title is not None else ""
            colour = {c for c in classes if re.fullmatch(r"c\d+", c)}
            if "sw" in classes:
                self.legend_classes |= colour
            elif "p" in classes:
                self.colour_classes |= colour
                if text.endswith(" continued"):
                    self.continued += 1
                else:
                    self.named.append(text.rsplit(" [", 1)[0])
            elif "m" in classes:
                self.colour_classes |= colour
                self.runs += 1
                match = re.match(r"(\d+) small params?, ", text)
                if match:
                    self.merged_params += int(match.group(1))
                else:
                    assert text == "parts of params named in other boxes", text
        self.texts = [t.text or "" for t in self.root.iter(NS + "text")]


class Render(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.deepseek = Path(cls.tmp.name, "deepseek.json")
        result = run("synth", ROOT / "testdata/configs/deepseek-v3.json", "-q", "-o", cls.deepseek)
        assert result.returncode == 0, result.stderr
        cls.params = {}
        cls.layouts = {}
        for dp in (8, 64, 4096):
            layout = plan(cls.tmp.name, cls.deepseek, f"ds-{dp}.json", "--dp", dp, "--strategy",
                          "layerwise")
            cls.layouts[dp] = layout
            cls.params[dp] = [p["name"] for b in json.loads(layout.read_text())["buffers"]
                              for p in b["params"]]

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def picture(self, layout):
        out = Path(self.tmp.name, layout.stem + ".svg")
        result = run("render", layout, "-o", out)
        self.assertEqual(result.returncode, 0, result.stderr)
        return Picture(out)

    def test_every_param_is_named_or_counted_once(self):
        for dp in (8, 64, 4096):
            with self.subTest(dp=dp):
                p = self.picture(self.layouts[dp])
                self.assertGreater(len(self.params[dp]), 30000)
                self.assertEqual(len(p.named) + p.merged_params, len(self.params[dp]))
                self.assertFalse(set(p.named) - set(self.params[dp]), "only layout params")
                self.assertEqual(len(p.named), len(set(p.named)), "each named once")
                self.assertLessEqual(len(p.named) + p.continued, 5000, "the box budget")

    def test_thirty_thousand_params_at_dp_4096_under_2_mb(self):
        for dp in (8, 64, 4096):
            with self.subTest(dp=dp):
                self.assertLess(self.picture(self.layouts[dp]).size, 2_000_000)

    def test_ranks_are_grouped_into_columns_at_least_4_pixels_wide(self):
        p = self.picture(self.layouts[4096])
        widths = {float(r.get("width")) for r in p.root.iter(NS + "rect")
                  if "use" in r.get("class", "")}
        self.assertTrue(widths)
        self.assertGreaterEqual(min(widths), 4.0)
        # 4096 ranks in columns of 16, each named by its ranks (neighbours that look alike
        # together): per buffer, the ranges cover ranks 0-4095 in order.
        titles = [r.find(NS + "title").text for r in p.root.iter(NS + "rect")
                  if "use" in r.get("class", "")]
        ranges = [tuple(map(int, re.match(r"ranks (\d+)-(\d+): params fill ", t).groups()))
                  for t in titles]
        starts = [first for first, _ in ranges if first == 0]
        self.assertEqual(len(starts), 2, "two buffers")
        for (first, last), (following, _) in zip(ranges, ranges[1:]):
            self.assertEqual((first % 16, (last + 1) % 16), (0, 0))
            self.assertIn(following, (last + 1, 0))
        self.assertEqual(ranges[-1][1], 4095)
        self.assertIn("each column is 16 ranks", " ".join(p.texts))

    def test_a_rank_axis(self):
        p = self.picture(self.layouts[4096])
        for label in ("rank", "0", "256", "512", "4095"):
            self.assertIn(label, p.texts)
        p = self.picture(self.layouts[8])
        for rank in range(8):
            self.assertIn(str(rank), p.texts)

    def test_the_legend_names_every_colour_used(self):
        for dp in (8, 4096):
            with self.subTest(dp=dp):
                p = self.picture(self.layouts[dp])
                self.assertTrue(p.colour_classes)
                self.assertEqual(p.colour_classes, p.legend_classes)
                # 61 decoder layers: ten ranges of seven (the last shorter), not every fifth.
                for label in ("layers 0-6", "layers 56-60", "embedding", "output layer",
                              "multi-token prediction", "padding"):
                    self.assertIn(label, p.texts)

    def test_padding_is_hatched_and_memory_per_rank_drawn(self):
        p = self.picture(self.layouts[4096])
        hatched = [r for r in p.root.iter(NS + "rect") if "pad" in r.get("class", "").split()]
        self.assertTrue(hatched)
        self.assertIsNotNone(p.root.find(f".//{NS}pattern[@id='hatch']"))
        memory = [r for r in p.root.iter(NS + "rect")
                  if set(r.get("class", "").split()) & {"mp", "mg", "mo"}]
        self.assertEqual(len(memory), 3)
        self.assertTrue(any("on every rank" in t for t in p.texts))

    def test_a_picture_converts_to_png_where_rsvg_is_installed(self):
        converter = "/usr/bin/rsvg-convert"
        if not os.path.exists(converter):
            self.skipTest("rsvg-convert (librsvg2-bin) is not installed")
        for dp in (8, 4096):
            svg = Path(self.tmp.name, f"ds-{dp}.svg")
            self.picture(self.layouts[dp])
            png = svg.with_suffix(".png")
            result = subprocess.run([converter, svg, "-o", png], capture_output=True,
                                    timeout=120)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertGreater(png.stat().st_size, 0)

    def test_output_to_a_directory_and_stdout(self):
        with tempfile.TemporaryDirectory() as tmp:
            layout = plan(tmp, ROOT / "testdata/manifests/llama3-8b.json", "llama.json",
                          "--dp", "8")
            result = run("render", layout, "-o", f"{tmp}/pictures/")
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertTrue(Path(tmp, "pictures", "llama.svg").is_file())
            result = run("render", layout, "-o", "-")
            self.assertTrue(result.stdout.startswith("<?xml"))


if __name__ == "__main__":
    main()
