#!/usr/bin/env python3
"""Hostile inputs through the built binary: every reader refuses a broken layout with a
message, every figure fits, inputs are bounded, outputs are safe, messages stay short.

Usage: run_robustness_tests.py PARAMLAYOUT SOURCE_ROOT
"""
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

from harness import BINARY, ROOT, main, run

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "SUMMARY: UndefinedBehaviorSanitizer", "terminate called", "Traceback")


class Case(unittest.TestCase):
    def assertClean(self, result):
        """No sanitizer report or crash trace, and a short message on each line."""
        for mark in SANITIZER_MARKS:
            self.assertNotIn(mark, result.stderr)
        for line in result.stderr.splitlines():
            self.assertLess(len(line), 600, "an error quotes at most ~100 characters of input")

    def assertRefused(self, result, code, *messages, stream="stderr"):
        self.assertClean(result)
        self.assertEqual(result.returncode, code, result.stdout + result.stderr)
        text = getattr(result, stream)
        for message in messages:
            self.assertIn(message, text)


def repro(name):
    return ROOT / "testdata/repro" / name


class BrokenLayouts(Case):
    """Each broken layout: check and verify list what is wrong (exit 1); render, stats and
    diff refuse it with check's first message (exit 2) and write nothing."""

    MANIFEST = "testdata/reference/manifests/random-1026.json"
    CASES = {
        "render_stats_bucket_oob.layout.json": 'param "p1": is in bucket 5, but the buffer has 1',
        "render_stats_shard0.layout.json": "bucket 0: size 2 is not a multiple of 128",
        "stats_rank_oob.layout.json": 'param "p0": [307200, 322200) is not inside its bucket',
        "render_alloc_64x1M.layout.json": "bucket 0: holds no param",
        "numel_sum_overflow.layout.json": 'param "p0": [128, 9223372036854775807) overlaps',
    }

    def test_every_reader_refuses(self):
        manifest = ROOT / self.MANIFEST
        with tempfile.TemporaryDirectory() as tmp:
            good = Path(tmp, "good.json")
            self.assertEqual(run("plan", manifest, "--dp", "4", "-q", "-o", good).returncode, 0)
            for name, message in self.CASES.items():
                layout = repro(name)
                with self.subTest(name):
                    self.assertRefused(run("check", layout, "--manifest", manifest), 1, message,
                                       stream="stdout")
                    self.assertRefused(run("verify", layout, "--manifest", manifest, "--backend",
                                           "cpu"), 1, message, "no data pass", stream="stdout")
                    out = Path(tmp, "picture.svg")
                    for args in (["render", layout, "-o", out],
                                 ["stats", layout, "--manifest", manifest],
                                 ["stats", layout, "--manifest", manifest, "--json"],
                                 ["diff", good, layout], ["diff", layout, good, "--json"]):
                        result = run(*args)
                        self.assertRefused(result, 2, f"{layout}: not a valid layout: ", message)
                        self.assertEqual(result.stdout, "")
                    self.assertFalse(out.exists())
            self.assertEqual(sorted(os.listdir(tmp)), ["good.json"])


class FiguresFit(Case):
    """What plan writes, every reader reads; a figure that would not fit is refused at plan
    time."""

    def test_plans_whose_bytes_do_not_fit_are_refused(self):
        for name, args in [("plan_stats_overflow.manifest.json", ["--dp", "8"]),
                           ("roundtrip_bytes.manifest.json", ["--dp", "1"]),
                           ("roundtrip_2p42.manifest.json",
                            ["--dp", "1048576", "--strategy", "layerwise"])]:
            with self.subTest(name), tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp, "layout.json")
                result = run("plan", repro(name), *args, "-o", out)
                self.assertRefused(result, 2, f"{repro(name)}: ", "too large",
                                   "9,223,372,036,854,775,807")
                self.assertEqual(os.listdir(tmp), [])

    def test_extreme_plans_read_back_with_every_subcommand(self):
        def manifest(*params):
            return {"schema": "paramlayout.manifest/v1", "model": "extreme",
                    "params": [dict(zip(("name", "shape", "dtype"), p)) for p in params]}
        cases = [
            # 2^60 bfloat16 elements: 2^61 bytes of params, as much of grads, and 12 bytes
            # of optimizer state per element over 2^20 ranks.
            (manifest(("a", [2 ** 60], "bfloat16")), ["--dp", "1048576"]),
            (manifest(("w", [2 ** 20, 2 ** 20], "float32"), ("b", [64], "float32")),
             ["--dp", "4096", "--strategy", "layerwise", "--packer", "balanced"]),
            (manifest(("e", [2 ** 40], "float16"), ("f", [3, 2 ** 38], "bfloat16")),
             ["--dp", "3", "--bucket-size", "1", "--pad-for-high-nccl-busbw"]),
            (manifest(("u", [2 ** 58], "float32")), ["--dp", "1", "--strategy", "unpadded"]),
        ]
        for m, args in cases:
            with self.subTest(args), tempfile.TemporaryDirectory() as tmp:
                path, layout = Path(tmp, "m.json"), Path(tmp, "layout.json")
                path.write_text(json.dumps(m))
                result = run("plan", path, *args, "-q", "-o", layout)
                self.assertRefused(result, 0)
                written = json.loads(layout.read_text())
                figures = written["stats"]["bytes_per_rank"]
                for value in [*figures.values(), written["stats"]["param_elements"]]:
                    self.assertIsInstance(value, int)
                    self.assertLess(value, 2 ** 63)
                self.assertRefused(run("check", layout, "--manifest", path, "--replan"), 0,
                                   "holds", stream="stdout")
                stats = run("stats", layout, "--manifest", path, "--json")
                self.assertRefused(stats, 0)
                self.assertEqual(json.loads(stats.stdout), written["stats"])
                self.assertRefused(run("render", layout, "-o", Path(tmp, "l.svg")), 0)
                self.assertLess(Path(tmp, "l.svg").stat().st_size, 1 << 20)
                self.assertRefused(run("diff", layout, layout), 0, "identical", stream="stdout")
                self.assertRefused(run("verify", layout, "--manifest", path, "--backend", "cpu"),
                                   2, "elements, more than the limit of",
                                   "--max-elements raises it")


class BoundedInput(Case):
    def test_an_endless_stream_is_read_no_further_than_the_limit(self):
        result = run("plan", "/dev/zero", "--dp", "4", "--max-input-size", "1M", timeout=60)
        self.assertRefused(result, 2, "/dev/zero: larger than 1.00 MiB, the input size limit",
                           "--max-input-size raises it")
        result = run("plan", "-", "--dp", "4", "--max-input-size", "1K", stdin="x" * 5000)
        self.assertRefused(result, 2, "<stdin>: larger than 1.00 KiB")

    def test_default_limit_and_the_option_that_raises_it(self):
        manifest = ROOT / "testdata/manifests/llama3-8b.json"
        size = manifest.stat().st_size
        self.assertRefused(run("plan", manifest, "--dp", "8", "--max-input-size", size - 1), 2,
                           "larger than")
        self.assertRefused(run("plan", manifest, "--dp", "8", "-q", "--max-input-size", size), 0)
        with tempfile.TemporaryDirectory() as tmp:
            sparse = Path(tmp, "huge.json")
            with open(sparse, "wb") as f:
                f.truncate((1 << 30) + 1)  # one byte over the default, never read
            for args in (["plan", sparse, "--dp", "8"], ["render", sparse],
                         ["check", sparse, "--manifest", manifest], ["diff", sparse, sparse],
                         ["synth", sparse]):
                self.assertRefused(run(*args), 2, "larger than 1.00 GiB, the input size limit")
        self.assertRefused(run("plan", manifest, "--dp", "8", "--max-input-size", "0"), 2,
                           "--max-input-size")


class SafeOutput(Case):
    def plan_to(self, target, *extra):
        manifest = ROOT / "testdata/reference/manifests/random-1001.json"
        return run("plan", manifest, "--dp", "2", "-q", "-o", target, *extra)

    def test_a_link_is_followed_and_its_target_replaced(self):
        with tempfile.TemporaryDirectory() as tmp:
            target, link = Path(tmp, "real.json"), Path(tmp, "link.json")
            target.write_text("old")
            target.chmod(0o600)
            link.symlink_to("real.json")
            self.assertRefused(self.plan_to(link), 0)
            self.assertTrue(link.is_symlink())
            self.assertEqual(json.loads(target.read_text())["options"]["dp"], 2)
            self.assertEqual(stat.S_IMODE(target.stat().st_mode), 0o600, "mode kept")
            dangling, created = Path(tmp, "dangling.json"), Path(tmp, "sub", "new.json")
            created.parent.mkdir()
            dangling.symlink_to(Path("sub", "new.json"))
            self.assertRefused(self.plan_to(dangling), 0)
            self.assertTrue(dangling.is_symlink())
            self.assertEqual(json.loads(created.read_text())["options"]["dp"], 2)
            self.assertEqual(sorted(os.listdir(tmp)), ["dangling.json", "link.json", "real.json",
                                                      "sub"])

    def test_fifos_and_devices_are_written_directly(self):
        with tempfile.TemporaryDirectory() as tmp:
            # A FIFO, and a link to one (as /dev/stdout is a link to a pipe or a terminal).
            fifo, link = Path(tmp, "fifo"), Path(tmp, "stdout")
            os.mkfifo(fifo)
            link.symlink_to(fifo)
            for target in (fifo, link):
                received = []
                reader = threading.Thread(target=lambda: received.append(fifo.read_text()),
                                          daemon=True)
                reader.start()
                self.assertRefused(self.plan_to(target), 0)
                reader.join(60)
                self.assertEqual(len(received), 1, "the FIFO was replaced, not written")
                self.assertEqual(json.loads(received[0])["options"]["dp"], 2)
            self.assertTrue(stat.S_ISFIFO(fifo.lstat().st_mode))
            self.assertTrue(link.is_symlink())
            if os.geteuid() != 0:
                return
            # Private copies of /dev/null and /dev/full: written, never replaced.
            null, full = Path(tmp, "null"), Path(tmp, "full")
            os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
            os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))
            self.assertRefused(self.plan_to(null), 0)
            self.assertRefused(self.plan_to(full), 2, f"{full}: cannot write: No space left")
            for node in (null, full):
                self.assertTrue(stat.S_ISCHR(node.lstat().st_mode))
            self.assertEqual(sorted(os.listdir(tmp)), ["fifo", "full", "null", "stdout"])

    def test_a_directory_gets_a_named_file_and_is_never_replaced(self):
        with tempfile.TemporaryDirectory() as tmp:
            self.assertRefused(run("render", ROOT / "testdata/repro/README.md", "-o", tmp), 2)
            self.assertEqual(os.listdir(tmp), [])
            result = run("synth", ROOT / "testdata/configs/gpt2.json", "-q", "-o", tmp)
            self.assertRefused(result, 0)
            self.assertEqual(os.listdir(tmp), ["gpt2.json"])
            manifest = Path(tmp, "gpt2.json")
            layout = Path(tmp, "layout.json")
            self.assertRefused(run("plan", manifest, "--dp", "2", "-q", "-o", layout), 0)
            result = run("verify", layout, "--manifest", manifest, "--backend", "cpu", "-q",
                         "--report", tmp)
            self.assertRefused(result, 2, f"{tmp}: is a directory")
            self.assertEqual(sorted(os.listdir(tmp)), ["gpt2.json", "layout.json"])

    def test_no_temporary_file_is_left_when_killed(self):
        # A layout of tens of MB takes a while to write; SIGTERM arrives while its temporary
        # file exists, as often as the timing allows.
        with tempfile.TemporaryDirectory() as tmp:
            manifest = Path(tmp, "wide.json")
            params = [{"name": f"layers.{i}.w", "shape": [64, 64], "dtype": "bfloat16"}
                      for i in range(200_000)]
            manifest.write_text(json.dumps({"schema": "paramlayout.manifest/v1",
                                            "params": params}))
            out = Path(tmp, "out", "layout.json")
            out.parent.mkdir()
            caught = 0
            for _ in range(3):
                process = subprocess.Popen([BINARY, "plan", manifest, "--dp", "8", "-q", "-o",
                                            out], stderr=subprocess.DEVNULL)
                deadline = time.monotonic() + 120
                while process.poll() is None and time.monotonic() < deadline:
                    if any(".tmp." in name for name in os.listdir(out.parent)):
                        process.send_signal(signal.SIGTERM)
                        caught += process.wait(60) == -signal.SIGTERM
                        break
                    time.sleep(0.0005)
                process.wait(120)
                self.assertEqual([n for n in os.listdir(out.parent) if ".tmp." in n], [])
                if caught:
                    break
            print(f"\n  killed while writing: {caught} time(s)", file=sys.stderr)


class Messages(Case):
    def plan_text(self, text, *args):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, "m.json")
            path.write_bytes(text if isinstance(text, bytes) else text.encode())
            return run("plan", path, "--dp", "4", *args, cwd=tmp)

    def test_json_that_simdjson_rejects_is_located(self):
        good = b'{"schema": "paramlayout.manifest/v1", "params": []}'
        self.assertRefused(self.plan_text(b"\xef\xbb\xbf" + good), 2,
                           "m.json: starts with a UTF-8 byte order mark")
        self.assertRefused(self.plan_text("[" * 1100 + "]" * 1100), 2,
                           "m.json: line 1, column 1025: nesting deeper than 1024")
        self.assertRefused(self.plan_text(good[:30] + b"\x00" + good[30:]), 2,
                           "m.json: line 1, column 31: a NUL byte")
        self.assertRefused(self.plan_text(
            '{"schema": "paramlayout.manifest/v1", "params": [{"name": "a", "shape": [2, 1e400],'
            ' "dtype": "float32"}]}'), 2, "m.json: /params/0/shape/1: number out of range: 1e400")

    def test_long_input_is_never_echoed_whole(self):
        long = "y" * 1_000_000
        cases = [
            '{"schema": "%s", "params": []}' % long,
            '{"schema": "paramlayout.manifest/v1", "params": [{"name": "%s", "shape": [1], '
            '"dtype": "float32"}, {"name": "%s", "shape": [1], "dtype": "float32"}]}'
            % (long, long),
            '{"schema": "paramlayout.manifest/v1", "params": [{"name": "a", "shape": [%s], '
            '"dtype": "float32"}]}' % ("9" * 100_000),
            '{"schema": "paramlayout.manifest/v1", "params": [{"name": "%s' % long,
            '{"schema": "paramlayout.manifest/v1", "params": [{"name": "a", "shape": [1], '
            '"dtype": "%s"}]}' % long,
        ]
        for text in cases:
            with self.subTest(text[:60]):
                result = self.plan_text(text)
                self.assertRefused(result, 2, "m.json: ")
                self.assertLess(len(result.stderr), 600)
                self.assertIn("...", result.stderr)

    def test_verify_timeout_and_work_limits(self):
        manifest = ROOT / "testdata/reference/manifests/random-1001.json"
        with tempfile.TemporaryDirectory() as tmp:
            layout = Path(tmp, "layout.json")
            self.assertEqual(run("plan", manifest, "--dp", "8", "-q", "-o", layout).returncode, 0)
            for value in ("nan", "inf", "1e300", "-1", "0", "86401", "x"):
                with self.subTest(value):
                    self.assertRefused(run("verify", layout, "--manifest", manifest, "--timeout",
                                           value), 2, "--timeout", "seconds")
            numel = sum(b["numel"] for b in json.loads(layout.read_text())["buffers"])
            self.assertRefused(run("verify", layout, "--manifest", manifest, "--backend", "cpu",
                                   "--max-elements", numel - 1), 2,
                               f"the data pass would move {numel:,} elements, more than the limit")
            result = run("verify", layout, "--manifest", manifest, "--backend", "cpu",
                         "--max-elements", numel, "--timeout", "0.5")
            self.assertRefused(result, 0, f"0 of {numel:,} elements (0%)")
            self.assertRefused(run("verify", layout, "--manifest", manifest, "--max-elements",
                                   "0"), 2, "--max-elements")


if __name__ == "__main__":
    main()
