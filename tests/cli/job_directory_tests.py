#!/usr/bin/env python3
"""CLI tests of `paramlayout job -o DIR`: the directory is replaced whole. A re-plan leaves
only the new job's files; files that are not a job's are refused (exit 2, named) unless
--replace; a run killed by SIGINT, SIGTERM or SIGKILL at many points leaves DIR exactly the
old job or exactly the new one, never a mix, and what it leaves beside DIR is named as a
paramlayout leftover and removed by the next run. The two jobs compared against are written
by complete runs into directories of their own. With NO_EXCHANGE_LIB (a library that makes
renameat2 refuse RENAME_EXCHANGE, preloaded), the same again the way a filesystem that cannot
exchange two names is served: DIR renamed aside, the new job renamed in.

Usage: job_directory_tests.py PARAMLAYOUT SOURCE_ROOT [NO_EXCHANGE_LIB]
"""
import ctypes
import errno
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

from harness import BINARY, ROOT, main

NO_EXCHANGE_LIB = ""

SMALL = ["--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "4",
         "--vocab-size", "1000", "--max-position-embeddings", "64", "--bf16",
         "--use-distributed-optimizer"]
DEEPSEEK = ["--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "16",
            "--expert-model-parallel-size", "64",
            "--pipeline-model-parallel-layout", "Et*3|(tt|)*29m|L", "--mtp-num-layers", "1",
            "--bf16", "--use-distributed-optimizer", "--overlap-grad-reduce",
            "--moe-grouped-gemm"]
JOB_FILE = re.compile(r"job\.json|stage\d+\.chunk\d+\.(manifest|layout)\.json")


def leftover_pattern(name):
    return re.compile(r"\." + re.escape(name) + r"\.paramlayout-(new|old)-\d+")


def job_command(out, world, args, *flags):
    return [BINARY, "job", "--world-size", str(world), "-q", "-o", str(out), *flags, "--", *args]


def deepseek_command(out, world):
    return [BINARY, "job", "--world-size", str(world), "--hf-config",
            str(ROOT / "testdata/configs/deepseek-v3.json"), "-q", "-o", str(out), "--",
            *DEEPSEEK]


def run(command, env=None):
    return subprocess.run(command, capture_output=True, text=True, errors="replace",
                          timeout=300, env=env)


def without_exchange():
    """The environment that preloads NO_EXCHANGE_LIB (under AddressSanitizer too)."""
    env = dict(os.environ, LD_PRELOAD=NO_EXCHANGE_LIB)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"),
                                                 "verify_asan_link_order=0"]))
    return env


def snapshot(directory):
    """{name: bytes} of every entry of `directory` (a directory entry maps to None)."""
    return {p.name: (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in Path(directory).iterdir()}


def pp_line(pp):
    return SMALL + ["--pipeline-model-parallel-size", str(pp)]


class Replan(unittest.TestCase):
    env = None  # the environment `job` runs in

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.base = Path(self.tmp.name)
        self.dir = self.base / "job"

    def tearDown(self):
        self.tmp.cleanup()

    def fresh(self, name, world, args):
        """The job as a complete run writes it into a directory of its own."""
        out = self.base / "fresh" / name
        result = run(job_command(out, world, args), self.env)
        self.assertEqual(result.returncode, 0, result.stderr)
        return snapshot(out)

    def job(self, world, args, *flags):
        return run(job_command(self.dir, world, args, *flags), self.env)

    def assert_beside_dir_only(self, *names):
        self.assertEqual(sorted(p.name for p in self.base.iterdir() if p.name != "fresh"),
                         sorted(["job", *names]))

    def test_pp8_replanned_at_pp2_leaves_only_the_pp2_files(self):
        self.assertEqual(self.job(8, pp_line(8)).returncode, 0)
        self.assertEqual(len(os.listdir(self.dir)), 2 * 8 + 1)
        result = self.job(2, pp_line(2))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["job.json", "stage0.chunk0.layout.json", "stage0.chunk0.manifest.json",
                          "stage1.chunk0.layout.json", "stage1.chunk0.manifest.json"])
        self.assertEqual(snapshot(self.dir), self.fresh("pp2", 2, pp_line(2)))
        self.assert_beside_dir_only()

    def test_foreign_files_refused_by_name_and_kept(self):
        self.assertEqual(self.job(8, pp_line(8)).returncode, 0)
        (self.dir / "notes.txt").write_text("mine\n")
        (self.dir / "plots").mkdir()
        before = snapshot(self.dir)
        result = self.job(2, pp_line(2))
        self.assertEqual(result.returncode, 2, result.stdout)
        self.assertIn("notes.txt, plots/", result.stderr)
        self.assertIn("--replace", result.stderr)
        self.assertEqual(snapshot(self.dir), before)
        self.assert_beside_dir_only()

    def test_replace_deletes_them(self):
        self.assertEqual(self.job(8, pp_line(8)).returncode, 0)
        (self.dir / "notes.txt").write_text("mine\n")
        (self.dir / "plots").mkdir()
        (self.dir / "plots" / "a.png").write_bytes(b"png")
        result = self.job(2, pp_line(2), "--replace")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(snapshot(self.dir), self.fresh("pp2", 2, pp_line(2)))
        self.assert_beside_dir_only()

    def test_a_directory_that_is_no_job_is_refused(self):
        self.dir.mkdir()
        (self.dir / "train.py").write_text("print()\n")
        (self.dir / "stage0.chunk0.layout.json.bak").write_text("{}\n")
        result = self.job(2, pp_line(2))
        self.assertEqual(result.returncode, 2, result.stdout)
        self.assertIn("not a job directory (no job.json)", result.stderr)
        self.assertIn("stage0.chunk0.layout.json.bak, train.py", result.stderr)
        self.assertEqual(sorted(os.listdir(self.dir)),
                         ["stage0.chunk0.layout.json.bak", "train.py"])

    def test_an_empty_directory_takes_the_job(self):
        self.dir.mkdir(mode=0o750)
        result = self.job(2, pp_line(2))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(snapshot(self.dir), self.fresh("pp2", 2, pp_line(2)))
        self.assertEqual(self.dir.stat().st_mode & 0o777, 0o750, "keeps its permissions")

    def test_a_file_in_the_way(self):
        self.dir.write_text("x")
        result = self.job(2, pp_line(2))
        self.assertEqual(result.returncode, 2)
        self.assertIn("a file of that name is in the way", result.stderr)
        self.assertEqual(self.dir.read_text(), "x")

    def test_the_directory_a_link_names_is_replaced_and_the_link_kept(self):
        real = self.base / "real"
        self.assertEqual(run(job_command(real, 8, pp_line(8)), self.env).returncode, 0)
        self.dir.symlink_to("real")
        result = self.job(2, pp_line(2))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(self.dir.is_symlink())
        self.assertEqual(os.readlink(self.dir), "real")
        self.assertEqual(snapshot(real), self.fresh("pp2", 2, pp_line(2)))
        self.assert_beside_dir_only("real")

    def test_a_link_to_nothing_is_refused(self):
        self.dir.symlink_to("missing")
        result = self.job(2, pp_line(2))
        self.assertEqual(result.returncode, 2)
        self.assertIn("a symbolic link to nothing", result.stderr)
        self.assertFalse((self.base / "missing").exists())

    def test_the_current_directory_is_refused(self):
        result = subprocess.run(job_command(".", 2, pp_line(2)), cwd=self.base,
                                capture_output=True, text=True, env=self.env)
        self.assertEqual(result.returncode, 2)
        self.assertIn("needs a name of its own", result.stderr)
        self.assertEqual(os.listdir(self.base), [])

    def test_leftovers_of_gone_runs_are_removed_and_nothing_else(self):
        self.assertEqual(self.job(8, pp_line(8)).returncode, 0)
        # Process ids above the kernel's largest (2^22): runs that are certainly gone.
        gone_new = self.base / ".job.paramlayout-new-999999991"
        gone_old = self.base / ".job.paramlayout-old-999999992"
        for d in (gone_new, gone_old):
            d.mkdir()
            (d / "stage0.chunk0.layout.json").write_text("{")
            (d / "job.json").write_text("{}")
        kept = {
            ".job.paramlayout-new-999999993": "notes.txt",   # holds a file no job has
            ".job.paramlayout-new-abc": "job.json",          # not a process id
            ".other.paramlayout-new-999999994": "job.json",  # another directory's
            ".job.paramlayout-new-999999995x": "job.json",
        }
        for name, inside in kept.items():
            (self.base / name).mkdir()
            (self.base / name / inside).write_text("{}")
        result = self.job(2, pp_line(2))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn(".job.paramlayout-new-999999993: left by an interrupted run, kept",
                      result.stderr)
        self.assertEqual(result.stderr.count("warning"), 1, result.stderr)
        self.assertFalse(gone_new.exists())
        self.assertFalse(gone_old.exists())
        self.assert_beside_dir_only(*kept)


class Killed(unittest.TestCase):
    """A re-plan of a 1,024-GPU DeepSeek-V3 job (32 chunks, 65 files) as a 2,048-GPU one and
    back, killed at many points: after delays spread over a whole run, and right after the
    first sign of writing (a new entry beside DIR or in it) plus a short random delay."""

    POINTS = 10  # per signal and kind of point
    env = None  # the environment `job` runs in

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.base = Path(cls.tmp.name)
        cls.jobs = {}
        for world in (1024, 2048):
            # At the depth of the killed runs' directories: job.json records the config's
            # path relative to itself.
            out = cls.base / f"fresh{world}" / "job"
            result = run(deepseek_command(out, world), cls.env)
            assert result.returncode == 0, result.stderr
            cls.jobs[world] = snapshot(out)
        assert cls.jobs[1024] != cls.jobs[2048]
        start = time.monotonic()
        for _ in range(3):
            run(deepseek_command(cls.base / "timing", 1024), cls.env)
        cls.run_seconds = (time.monotonic() - start) / 3

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def which_job(self, directory):
        files = snapshot(directory)
        for world, job in self.jobs.items():
            if files == job:
                return world
        whose = {world: sum(job.get(n) == content for n, content in files.items())
                 for world, job in self.jobs.items()}
        self.fail(f"{directory} holds neither job whole: of its {len(files)} files, "
                  f"{whose} as in each job (by world size), "
                  f"{sorted(n for n in files if not JOB_FILE.fullmatch(n))} not a job's")

    def start(self, out, world):
        # As from a terminal: the signals at their default actions, whatever the test runner set.
        def defaults():
            for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(s, signal.SIG_DFL)
        return subprocess.Popen(deepseek_command(out, world), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, preexec_fn=defaults, env=self.env)

    @staticmethod
    def wait_for_writing(process, base, out, deadline):
        """Returns once an entry appears beside `out` or `out` changes (a write began)."""
        def state():
            try:
                return (frozenset(os.listdir(base)), os.stat(out).st_mtime_ns)
            except FileNotFoundError:
                return None
        first = state()
        while time.monotonic() < deadline and process.poll() is None:
            if state() != first:
                return

    def kill_at_points(self, sig):
        rng = random.Random(f"{sig}-points")
        base = self.base / f"killed-{int(sig)}"
        base.mkdir()
        out = base / "job"
        leftover = leftover_pattern("job")
        self.assertEqual(run(deepseek_command(out, 1024), self.env).returncode, 0)
        current = 1024
        outcomes = {"old": 0, "new": 0, "leftovers": 0, "between renames": 0}
        i = 0
        # The points set, then more (later ones) until some fell on each side of the exchange.
        while i < 2 * self.POINTS or (min(outcomes["old"], outcomes["new"]) == 0 and
                                      i < 4 * self.POINTS):
            other = 2048 if current == 1024 else 1024
            triggered = i % 2 == 1
            process = self.start(out, other)
            if triggered:
                self.wait_for_writing(process, base, out, time.monotonic() + 5)
                time.sleep(rng.uniform(0, 0.5 * self.run_seconds))
            else:
                time.sleep(1.5 * self.run_seconds * (i // 2) / self.POINTS * rng.uniform(0.9, 1.1))
            i += 1
            process.send_signal(sig)
            _, err = process.communicate(timeout=60)
            self.assertNotIn(b"error", err)
            beside = [n for n in os.listdir(base) if n != "job"]
            for name in beside:
                self.assertRegex(name, leftover)
            if sig != signal.SIGKILL:
                self.assertEqual(beside, [], f"a {sig.name} removes what the run was writing")
            outcomes["leftovers"] += bool(beside)
            if not out.exists() and self.env is not None:
                # Killed between renaming DIR aside and the new job in (no exchange): both
                # jobs whole beside it, the old one aside.
                self.assertEqual(len(beside), 2, beside)
                aside = next(n for n in beside if "-old-" in n)
                staged = next(n for n in beside if "-new-" in n)
                self.assertEqual(self.which_job(base / aside), current)
                self.assertEqual(self.which_job(base / staged), other)
                outcomes["between renames"] += 1
                found = current
            else:
                found = self.which_job(out)
                self.assertIn(found, (current, other))
                outcomes["old" if found == current else "new"] += 1
            # The next run takes DIR whole and removes what the killed one left.
            nxt = other if found == current else current
            result = run(deepseek_command(out, nxt), self.env)
            self.assertEqual(result.returncode, 0, result.stderr)
            self.assertEqual(self.which_job(out), nxt)
            self.assertEqual(os.listdir(base), ["job"])
            current = nxt
        # The points fell on both sides of the exchange.
        self.assertGreater(outcomes["old"], 0, outcomes)
        self.assertGreater(outcomes["new"], 0, outcomes)
        print(f"{sig.name}: {outcomes}", file=sys.stderr)
        return outcomes

    def test_sigint(self):
        self.kill_at_points(signal.SIGINT)

    def test_sigterm(self):
        self.kill_at_points(signal.SIGTERM)

    def test_sigkill(self):
        outcomes = self.kill_at_points(signal.SIGKILL)
        # Some points fell while the new job was being written (it stays beside DIR).
        self.assertGreater(outcomes["leftovers"], 0, outcomes)


def need_no_exchange_lib():
    if not NO_EXCHANGE_LIB:
        raise unittest.SkipTest("no NO_EXCHANGE_LIB given")
    # The library refuses an exchange (a test of the test: else the exchange is tested twice).
    libc = ctypes.CDLL(NO_EXCHANGE_LIB, use_errno=True)
    with tempfile.TemporaryDirectory() as tmp:
        a, b = (os.fsencode(Path(tmp, n)) for n in "ab")
        os.mkdir(a)
        os.mkdir(b)
        assert libc.renameat2(-100, a, -100, b, 2) == -1 and ctypes.get_errno() == errno.EINVAL
    return without_exchange()


class ReplanWithoutExchange(Replan):
    @classmethod
    def setUpClass(cls):
        cls.env = need_no_exchange_lib()


class KilledWithoutExchange(Killed):
    POINTS = 6
    test_sigterm = None  # as SIGINT here

    @classmethod
    def setUpClass(cls):
        cls.env = need_no_exchange_lib()
        super().setUpClass()


if __name__ == "__main__":
    NO_EXCHANGE_LIB = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else ""
    main()
