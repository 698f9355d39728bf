#!/usr/bin/env python3
"""`pip install .` into a fresh virtual environment, as a user installs paramlayout: the
program on the environment's PATH, `import paramlayout` from the installed package (not
the source tree), `python3 -m paramlayout`, and a plan checked by the installed program.

The environment sees the system's packages (`--system-site-packages`), so pip builds with
Debian's meson-python (`--no-build-isolation`) and needs no network (`--no-index`). The
project is built in BUILD_DIR, kept between runs so that a second run builds only what
changed; the environment (BUILD_DIR/venv) is made anew each run.

Exits 77 (skipped, with the reason) where the venv module or meson-python is missing.
Usage: test_package.py SOURCE_ROOT BUILD_DIR
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(sys.argv[1]).resolve()
BUILD = Path(sys.argv[2]).resolve()

for module, package in (("ensurepip", "python3-venv"), ("mesonpy", "python3-mesonpy")):
    if importlib.util.find_spec(module) is None:
        print(f"SKIP: {sys.executable} cannot import {module} (Debian package {package})")
        sys.exit(77)


def run(*args, **kwargs):
    return subprocess.run([*map(str, args)], capture_output=True, text=True, **kwargs)


def pip_install(python, builddir):
    return run(python, "-m", "pip", "install", "--no-build-isolation", "--no-index",
               "--disable-pip-version-check", f"--config-settings=builddir={builddir}", ROOT,
               timeout=1700)


IMPORTS = """
import importlib.util, json, paramlayout
modules = [paramlayout.__file__]
if importlib.util.find_spec("torch"):
    import paramlayout.from_torch, paramlayout.megatron
    modules += [paramlayout.from_torch.__file__, paramlayout.megatron.__file__]
print(json.dumps({"modules": modules, "binary": paramlayout.binary(),
                  "version": paramlayout.__version__}))
"""


class Package(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.venv = BUILD / "venv"  # one path, so that meson-python reconfigures the build
        made = run(sys.executable, "-m", "venv", "--clear", "--system-site-packages", cls.venv)
        assert made.returncode == 0, made.stderr
        cls.python = cls.venv / "bin" / "python"
        cls.env = dict(os.environ, PATH=f"{cls.venv / 'bin'}{os.pathsep}{os.environ['PATH']}",
                       VIRTUAL_ENV=str(cls.venv))
        cls.env.pop("PYTHONPATH", None)
        BUILD.mkdir(parents=True, exist_ok=True)
        installed = pip_install(cls.python, BUILD / "build")
        if installed.returncode != 0:
            # A build directory configured for another interpreter may not reconfigure: the
            # same install from scratch tells that apart from a real failure.
            shutil.rmtree(BUILD / "build", ignore_errors=True)
            installed = pip_install(cls.python, BUILD / "build")
        assert installed.returncode == 0, f"pip install . failed:\n{installed.stdout[-5000:]}" \
                                          f"{installed.stderr[-5000:]}"

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def venv_python(self, *args):
        return run(self.python, *args, cwd=self.tmp.name, env=self.env, timeout=120)

    def test_program_on_path(self):
        program = shutil.which("paramlayout", path=self.env["PATH"])
        self.assertEqual(Path(program), self.venv / "bin" / "paramlayout")
        version = run(program, "--version", timeout=60)
        self.assertEqual(version.returncode, 0, version.stderr)
        meta = self.venv_python("-c", "import importlib.metadata as m; "
                                      "print(m.version('paramlayout'))")
        self.assertEqual(meta.returncode, 0, meta.stderr)
        self.assertTrue(version.stdout.startswith(f"paramlayout {meta.stdout.strip()} (verify: "),
                        version.stdout)

    def test_import_from_the_environment(self):
        found = self.venv_python("-c", IMPORTS)
        self.assertEqual(found.returncode, 0, found.stderr)
        found = json.loads(found.stdout)
        for module in found["modules"]:  # from_torch and megatron where torch imports
            self.assertTrue(Path(module).is_relative_to(self.venv), module)
        self.assertEqual(Path(found["binary"]), self.venv / "bin" / "paramlayout")
        self.assertNotEqual(found["version"], "unknown")

    def test_plan_and_check_with_the_installed_program(self):
        manifest = ROOT / "testdata" / "manifests" / "llama3-8b.json"
        layout = Path(self.tmp.name, "layout.json")
        planned = self.venv_python("-m", "paramlayout", "plan", manifest, "--dp", "8",
                                   "--strategy", "layerwise", "-q", "-o", layout)
        self.assertEqual(planned.returncode, 0, planned.stderr)
        checked = run("paramlayout", "check", layout, "--manifest", manifest, "--replan",
                      env=self.env, timeout=120)
        self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)
        self.assertIn("holds", checked.stdout)
        bad = self.venv_python("-m", "paramlayout", "plan", manifest)
        self.assertEqual(bad.returncode, 2)  # the program's own exit status, through python -m


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
