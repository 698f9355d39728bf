#!/usr/bin/env python3
"""CLI test of `paramlayout job` on Megatron-LM's own launch scripts: every script in
Megatron-LM's examples/ that launches pretrain_gpt.py, pretrain_mamba.py or
pretrain_hybrid.py is run as its README says (its variables set, its positional arguments
given), with torchrun, python, srun and sbatch replaced by stand-ins that record the launch
line instead of training. Each line is then planned by `paramlayout job` on the world the
script launches: it plans, or it is refused with the reason Megatron-LM refuses it for.

Tokenizer files the scripts name are stand-ins with the published sizes of the tokenizers
they name (GPT-2's vocab.json: 50,257 tokens; Mixtral's tokenizer.model: 32,000 pieces),
made here by construction; a Hub tokenizer name gets --vocab-size.

Usage: example_scripts.py PARAMLAYOUT UPSTREAM_DIR (the folder holding
megatron-lm-d98e8a64.tar.gz); exits 77 when the tarball is not there.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

BINARY = ""
UPSTREAM = Path()
TARBALL = "megatron-lm-d98e8a64.tar.gz"

# A stand-in for torchrun / python / srun / sbatch: records the launch line (and the world
# it asks for) when it starts a pretrain script; otherwise runs what it was given.
SHIM = r'''#!PYTHON
import json, os, subprocess, sys
name = os.path.basename(sys.argv[0])
argv = sys.argv[1:]
if name == "uv":  # uv run CMD...: run CMD
    os.execvp(argv[1], argv[1:])
if name == "sbatch":
    nodes = next((a.split("=", 1)[1] for a in argv if a.startswith("--nodes=")), "1")
    script = argv[-1]
    sys.exit(subprocess.run(["bash", script], env=dict(os.environ, SHIM_NODES=nodes)).returncode)
if name == "srun":
    command = argv[argv.index("-c") + 1] if "-c" in argv else ""
    sys.exit(subprocess.run(["sh", "-c", command]).returncode)
pretrain = next((i for i, a in enumerate(argv)
                 if os.path.basename(a) in ("pretrain_gpt.py", "pretrain_mamba.py",
                                            "pretrain_hybrid.py")), None)
if pretrain is None:
    os.execv(sys.executable, [sys.executable, *argv])
world = int(os.environ.get("SHIM_NODES", "1")) * 8
if name == "torchrun" or argv[:2] == ["-m", "torch.distributed.run"]:
    def value(flag, default):
        for i, a in enumerate(argv[:pretrain]):
            if a == flag:
                return argv[i + 1]
            if a.startswith(flag + "="):
                return a.split("=", 1)[1]
        return default
    world = int(value("--nproc_per_node", "1")) * int(value("--nnodes", "1"))
capture = os.environ["SHIM_CAPTURE"]
lines = json.loads(open(capture).read()) if os.path.exists(capture) else []
lines.append({"world": world, "script": os.path.basename(argv[pretrain]),
              "args": argv[pretrain + 1:]})
open(capture, "w").write(json.dumps(lines))
'''


def gpt2_vocab(path):
    """A vocab.json of GPT-2's published 50,257 tokens (the last <|endoftext|>)."""
    tokens = {f"t{i}": i for i in range(50256)}
    tokens["<|endoftext|>"] = 50256
    Path(path).write_text(json.dumps(tokens))


def sentencepiece_model(path, pieces):
    """A SentencePiece ModelProto with `pieces` pieces, the first <unk>."""
    def field(number, payload):
        length, n = b"", len(payload)
        while True:
            byte = n & 0x7F
            n >>= 7
            length += bytes([byte | (0x80 if n else 0)])
            if not n:
                break
        return bytes([number << 3 | 2]) + length + payload
    out = [field(1, field(1, b"<unk>") + b"\x18\x02")]
    out += [field(1, field(1, f"p{i}".encode()) + b"\x18\x01") for i in range(1, pieces)]
    Path(path).write_bytes(b"".join(out))


class Case:
    """A script, run from `cwd` (relative to Megatron-LM's root) with `args` ("{work}" is the
    folder holding the tokenizer files) and `env`."""

    def __init__(self, script, args=(), env=None, edit=None, expect=None, cwd="."):
        self.script, self.args, self.env, self.cwd = script, list(args), env or {}, cwd
        self.edit = edit or {}       # text replacements in the script, as its README asks
        self.expect = expect         # None: plans; else the refusal's words


# What each script's README asks, and what Megatron-LM does with the line it launches.
CASES = [
    # The script expands TRAINING_ARGS unquoted, so --step-batch-size-schedule's one value
    # "0:16 2.4B:320 ..." reaches Megatron-LM as five words: its argparse refuses the rest.
    Case("gpt3/train_gpt3_175b_distributed.sh",
         ["ckpt", "tb", "{work}/gpt2-vocab.json", "gpt2-merges.txt", "data_text_document"],
         expect="'2.4B:320' (a value no argument takes)"),
    Case("llama/train_llama3_8b_h100_fp8.sh", ["ckpt", "tb", "MOCK", "MOCK"]),
    Case("llama/train_llama3_8b_h100_fp8.sh", ["ckpt", "tb", "meta-llama/Meta-Llama-3-8B", "data"]),
    # pp 4 x ep 8 on one node (8 GPUs): the expert model-parallel size 32 does not divide 8.
    Case("mixtral/train_mixtral_8x7b_distributed.sh", ["ckpt", "{work}/tokenizer.model", "data"],
         expect="--world-size: 8 is not divisible by etp x ep x pp = 1 x 8 x 4 = 32"),
    Case("mixtral/train_mixtral_8x7b_distributed.sh", ["ckpt", "{work}/tokenizer.model", "data"],
         env={"SLURM_NNODES": "4"}),
    Case("mamba/train.sh", ["data", "{work}/tokenizer.model"], cwd="examples/mamba"),
    Case("mamba/train.sh", ["data", "{work}/tokenizer.model"], cwd="examples/mamba",
         edit={'MODEL_SCALE="800M"': 'MODEL_SCALE="8B"'}),
    # 12 layers on pp = the 8 GPUs: validate_args refuses (arguments.py:997).
    Case("gptoss/02_train.sh", ["--checkpoint-path", "{work}"],
         expect="the 12 layers are not divisible by the 8 pipeline stages"),
    # With NUM_NODES set so that pp divides the layers (a distributed config file, as its
    # README allows): 12 GPUs, pp 12.
    Case("gptoss/02_train.sh", ["--checkpoint-path", "{work}", "--distributed-config-file",
                                "{work}/dist.sh"]),
    # Megatron-FSDP lays out its own buffers.
    Case("megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh", ["ckpt", "tb", "MOCK", "MOCK"],
         expect="Megatron-FSDP lays out its own buffers"),
    # --DDP-impl was removed from Megatron-LM: its parser refuses the line.
    Case("academic_paper_scripts/sc21/run_table_1.sh",
         cwd="examples/academic_paper_scripts/sc21", expect="--DDP-impl (did you mean"),
]


class ExampleScripts(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        root = Path(cls.tmp.name)
        with tarfile.open(UPSTREAM / TARBALL) as tar:
            members = [m for m in tar.getmembers()
                       if m.name.startswith("megatron-lm/examples/") or
                       m.name in ("megatron-lm/pretrain_gpt.py", "megatron-lm/pretrain_mamba.py",
                                  "megatron-lm/pretrain_hybrid.py")]
            tar.extractall(root, members=members, filter="data")
        cls.megatron = root / "megatron-lm"
        cls.bin = root / "bin"
        cls.bin.mkdir()
        for name in ("torchrun", "python", "python3", "srun", "sbatch", "uv"):
            (cls.bin / name).write_text(SHIM.replace("PYTHON", sys.executable, 1))
            (cls.bin / name).chmod(0o755)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def launch_lines(self, case, work):
        """The launch lines the script runs, as the stand-ins record them."""
        script = self.megatron / "examples" / case.script
        text = script.read_text()
        for old, new in case.edit.items():
            self.assertIn(old, text)
            text = text.replace(old, new)
        if "sc21" in case.script:  # CONFIG.sh's placeholders, set as its README asks
            config = script.parent / "CONFIG.sh"
            config.write_text(config.read_text()
                              .replace("<megatron source code directory>", str(self.megatron))
                              .replace("<path to bpe vocab file>", str(work / "gpt2-vocab.json"))
                              .replace("<path to bpe merges file>", "gpt2-merges.txt"))
            config.write_text(re.sub(r"<[^>]*>", "unset", config.read_text()))
        script.write_text(text)
        capture = work / "lines.json"
        env = dict(os.environ, PATH=f"{self.bin}:{os.environ['PATH']}",
                   SHIM_CAPTURE=str(capture), **case.env)
        args = [a.replace("{work}", str(work)) for a in case.args]
        result = subprocess.run(["bash", str(script), *args], cwd=self.megatron / case.cwd,
                                env=env, capture_output=True, text=True, timeout=300)
        self.assertTrue(capture.exists(), f"{case.script} launched nothing: {result.stdout}"
                        f"{result.stderr}")
        return json.loads(capture.read_text())

    def test_every_script(self):
        for case in CASES:
            with self.subTest(case.script, args=case.args, env=case.env, edit=case.edit), \
                    tempfile.TemporaryDirectory() as tmp:
                work = Path(tmp)
                gpt2_vocab(work / "gpt2-vocab.json")
                (work / "dist.sh").write_text("GPUS_PER_NODE=4\nNUM_NODES=3\n")
                sentencepiece_model(work / "tokenizer.model", 32000)
                lines = self.launch_lines(case, work)
                for line in lines[:1]:
                    args = line["args"]
                    if "HuggingFaceTokenizer" in args and "--vocab-size" not in args:
                        args += ["--vocab-size", "128256"]  # a Hub tokenizer's size
                    result = subprocess.run(
                        [BINARY, "job", "--world-size", str(line["world"]), "--", *args],
                        cwd=work, capture_output=True, text=True, timeout=300)
                    if case.expect is None:
                        self.assertEqual(result.returncode, 0, result.stderr)
                        self.assertIn("heaviest stage", result.stdout)
                    else:
                        self.assertEqual(result.returncode, 2, result.stdout)
                        self.assertIn(case.expect, result.stderr)


if __name__ == "__main__":
    BINARY, UPSTREAM = str(Path(sys.argv[1]).resolve()), Path(sys.argv[2])
    if not (UPSTREAM / TARBALL).exists():
        print(f"skipped: {UPSTREAM / TARBALL} is not there")
        sys.exit(77)
    unittest.main(argv=sys.argv[:1], verbosity=2)
