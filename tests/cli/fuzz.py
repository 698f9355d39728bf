#!/usr/bin/env python3
"""A seeded, structure-aware fuzzer over every subcommand.

Each case takes a seed input (a manifest from testdata/reference/manifests/, a layout planned
from one, or a Hugging Face config from testdata/configs/), mutates its JSON tree or its
bytes, and runs the subcommands that read it. Every run must exit 0, 1 or 2 (with a message
when not 0) within the time limit, print no sanitizer report, quote at most ~100 characters
of input per error line, and leave no temporary file behind. Case N of seed S is the same
on every machine: rerun one with --seed S --only N.

Usage: fuzz.py PARAMLAYOUT SOURCE_ROOT [--cases N] [--seed S] [--only N] [--jobs N]
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "SUMMARY: UndefinedBehaviorSanitizer", "terminate called", "Traceback")
TIMEOUT = 120  # seconds per run: generous for a sanitizer build on a busy machine
VERIFY_LIMIT = str(1 << 22)  # elements the cpu data pass may move per run

INTEGERS = [0, 1, -1, 2, 3, 7, 63, 64, 65, 127, 128, 129, 4096, 65536, 2 ** 20, 2 ** 20 + 1,
            2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 40, 2 ** 53, 2 ** 62, 2 ** 63 - 1, -2 ** 63,
            2 ** 63, 2 ** 64 - 1, 2 ** 64, 10 ** 30]
STRINGS = ["", "x", "float32", "bfloat16", "float16", "uint8", "fp8", "nvfp4", "layerwise",
           "sequential-dp", "unpadded", "balanced", "megatron", "paramlayout.layout/v1",
           "paramlayout.manifest/v1", "paramlayout.layout/v2", "LlamaForCausalLM",
           "DeepseekV3ForCausalLM", "MixtralForCausalLM", "Qwen3MoeForCausalLM", "layers.7.w",
           "layers.99999999999999999999.w", "\u00e9\u4e2d\U0001F600", "a\nb\tc\u0001",
           "\u0000", "y" * 5000]
# Text that JSON encoders do not write but readers must take: replaced in after dumping.
RAW_NUMBERS = ["1e400", "-1e400", "1e-400", "-0", "0.5", "1E2", "123456789012345678901234567890",
               "4611686018427387904.0", "NaN", "Infinity"]


class Mutator:
    """Mutations of a JSON tree that keep most of its structure, so that the readers get past
    their syntax checks and into their rules."""

    def __init__(self, rng):
        self.rng = rng
        self.raw = {}  # placeholder string -> raw JSON text

    def nodes(self, tree):
        """(parent, key) of every value below the root."""
        out, stack = [], [tree]
        while stack:
            node = stack.pop()
            items = node.items() if isinstance(node, dict) else enumerate(node) \
                if isinstance(node, list) else ()
            for key, value in items:
                out.append((node, key))
                if isinstance(value, (dict, list)):
                    stack.append(value)
        return out

    def value(self, old):
        r = self.rng
        choice = r.random()
        if isinstance(old, bool) or old is None:
            return r.choice([True, False, None, 0, "true"])
        if isinstance(old, int) and choice < 0.6:
            return r.choice([old + 1, old - 1, old * 2, old // 2, -old, old + 64, old + 128,
                             old * 1024, old + 2 ** 62, r.choice(INTEGERS)])
        if isinstance(old, str) and choice < 0.5:
            return r.choice(STRINGS + [old + old, old[:-1], old.upper()])
        if choice < 0.75:
            return r.choice(INTEGERS + STRINGS)
        if choice < 0.85:
            token = f"@raw{len(self.raw)}@"
            self.raw[token] = r.choice(RAW_NUMBERS)
            return token
        return r.choice([None, True, [], {}, [old], {"x": old}, [1] * 3])

    def mutate_tree(self, tree):
        r = self.rng
        nodes = self.nodes(tree)
        if not nodes:
            return
        parent, key = r.choice(nodes)
        kind = r.random()
        if kind < 0.55:
            parent[key] = self.value(parent[key])
        elif kind < 0.65:
            del parent[key]
        elif kind < 0.75 and isinstance(parent, list):
            parent.insert(r.randrange(len(parent) + 1), json.loads(json.dumps(parent[key])))
        elif kind < 0.85:
            # Swap with a value of the same type: start and end, two params of a list, ...
            # (never a container with one inside it).
            value = parent[key]
            same = [(p, k) for p, k in nodes if type(p[k]) is type(value) and
                    (not isinstance(value, (dict, list)) or p is parent)]
            p2, k2 = r.choice(same)
            parent[key], p2[k2] = p2[k2], value
        elif kind < 0.92 and isinstance(parent, dict):
            parent[r.choice(["unknown", "stats", "options", "buckets", "params"])] = \
                self.value(parent[key])
        elif isinstance(parent, list) and len(parent) > 1:
            r.shuffle(parent)
        else:
            parent[key] = self.value(parent[key])

    def to_text(self, tree):
        text = json.dumps(tree, indent=self.rng.choice([None, 1]))
        for token, raw in self.raw.items():
            text = text.replace(f'"{token}"', raw)
        return text.encode()

    def mutate_bytes(self, data):
        r = self.rng
        kind = r.randrange(7)
        at = r.randrange(len(data) + 1)
        if kind == 0:
            return data[:at]
        if kind == 1:
            return b"\xef\xbb\xbf" + data
        if kind == 2:
            return data[:at] + b"\x00" + data[at:]
        if kind == 3 and data:
            i = r.randrange(len(data))
            return data[:i] + bytes([data[i] ^ (1 << r.randrange(8))]) + data[i + 1:]
        if kind == 4:
            depth = r.choice([10, 1023, 1024, 1025, 5000])
            return b"[" * depth + data + b"]" * depth
        if kind == 5:  # a duplicate key
            brace = data.find(b"{", at)
            return data if brace < 0 else data[:brace + 1] + b'"schema": 1, ' + data[brace + 1:]
        return data + data[:at]

    def scale_layout(self, tree):
        """Multiplies every offset and size of a layout by a power of two, and maybe sets
        every shard count to another: a layout that still keeps its promises (but no longer
        matches its manifest), with figures far past its seed's."""
        r = self.rng
        factor = 2 ** r.choice([1, 7, 20, 30, 40, 43])
        shards = 2 ** r.randrange(21) if factor >= 2 ** 20 and r.random() < 0.5 else None
        if shards is not None:
            tree["options"]["dp"] = tree["options"]["expert_dp"] = shards
        for b in tree.get("buffers", []):
            b["numel"] *= factor
            b["numel_unpadded"] *= factor
            if shards is not None and b["num_shards"] is not None:
                b["num_shards"] = shards
            for item in b["buckets"]:
                for key in ("start", "end", "numel_unpadded"):
                    item[key] *= factor
            for item in b["params"]:
                item["start"] *= factor
                item["end"] *= factor

    def mutate(self, tree, layout=False):
        if layout and self.rng.random() < 0.3:
            self.scale_layout(tree)
            if self.rng.random() < 0.5:
                return self.to_text(tree)
        for _ in range(self.rng.choice([1, 1, 2, 3])):
            self.mutate_tree(tree)
        data = self.to_text(tree)
        if self.rng.random() < 0.12:
            data = self.mutate_bytes(data)
        return data


class Fuzzer:
    def __init__(self, binary, root, seed, keep):
        self.binary, self.root, self.seed, self.keep = binary, root, seed, keep
        self.lock = threading.Lock()
        self.runs = 0
        self.codes = {}
        self.failures = []
        self.work = Path(tempfile.mkdtemp(prefix="paramlayout-fuzz-"))
        refs = sorted((root / "testdata/reference/manifests").glob("random-10*.json"))
        self.manifests = refs[:12] + [
            root / "testdata/manifests/llama3-8b.json",
            root / "testdata/reference/manifests/mixtral-8x7b-tp2-ep8.json"]
        self.configs = sorted((root / "testdata/configs").glob("*.json"))
        self.configs = [c for c in self.configs if c.name != "published.json"]
        self.layouts = self.plan_seed_layouts()

    def plan_seed_layouts(self):
        options = [["--dp", "4"], ["--dp", "8", "--strategy", "layerwise"],
                   ["--dp", "8", "--strategy", "layerwise", "--packer", "balanced"],
                   ["--dp", "2", "--strategy", "unpadded"],
                   ["--dp", "16", "--expert-dp", "2", "--bucket-size", "1000"],
                   ["--dp", "3", "--pad-for-high-nccl-busbw", "--grad-reduce-in-fp32"]]
        layouts = []
        for i, manifest in enumerate(self.manifests):
            out = self.work / f"seed-{i}.layout.json"
            args = options[i % len(options)]
            result = subprocess.run([self.binary, "plan", manifest, *args, "-q", "-o", out],
                                    capture_output=True, text=True, timeout=TIMEOUT)
            if result.returncode != 0:
                raise SystemExit(f"cannot plan the seed {manifest}: {result.stderr}")
            layouts.append((out, manifest))
        return layouts

    def run(self, case, tmp, args, saved):
        """Runs one command and records what is wrong with how it ended."""
        try:
            result = subprocess.run([self.binary, *map(str, args)], cwd=tmp, capture_output=True,
                                    text=True, errors="replace", timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            return self.fail(case, args, saved, f"no answer within {TIMEOUT} s")
        with self.lock:
            self.runs += 1
            self.codes[result.returncode] = self.codes.get(result.returncode, 0) + 1
        problems = []
        if result.returncode not in (0, 1, 2):
            problems.append(f"exit {result.returncode}")
        if result.returncode != 0 and not (result.stdout.strip() or result.stderr.strip()):
            problems.append("no message")
        problems += [f"'{m}' on stderr" for m in SANITIZER_MARKS if m in result.stderr]
        if any(len(line) > 1000 for line in result.stderr.splitlines()):
            problems.append("an error line over 1,000 characters")
        leftover = [p.name for p in Path(tmp).iterdir() if ".tmp." in p.name]
        if leftover:
            problems.append(f"temporary files left: {leftover}")
        if problems:
            self.fail(case, args, saved, "; ".join(problems), result.stderr[-2000:])
        return result

    def fail(self, case, args, saved, what, stderr=""):
        with self.lock:
            kept = self.keep / f"case-{case}"
            shutil.copytree(saved, kept, dirs_exist_ok=True)
            command = " ".join(str(a).replace(str(saved), str(kept)) for a in args)
            self.failures.append(f"case {case}: {command}: {what}\n{stderr}")
        return None

    def case(self, case):
        rng = random.Random(f"{self.seed}-{case}")
        mutator = Mutator(rng)
        tmp = Path(tempfile.mkdtemp(dir=self.work))
        try:
            kind = rng.choice(["manifest", "layout", "layout", "layout-manifest", "config",
                               "job"])
            getattr(self, "case_" + kind.replace("-", "_"))(case, rng, mutator, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def write(self, tmp, name, data):
        path = tmp / name
        path.write_bytes(data)
        return path

    def readers(self, case, rng, tmp, layout, manifest, seed_layout):
        """Every subcommand that reads a layout."""
        runs = [["check", layout, "--manifest", manifest] + rng.choice([[], ["--replan"]]),
                ["stats", layout, "--manifest", manifest] + rng.choice([[], ["--json"]]),
                ["render", layout, "-o", tmp / "picture.svg"],
                ["diff", seed_layout, layout] + rng.choice([[], ["--json"]]),
                ["verify", layout, "--manifest", manifest, "--backend", "cpu", "-q",
                 "--max-elements", VERIFY_LIMIT, "--gpus", rng.choice(["1", "2", "3", "4"])]]
        for args in runs:
            self.run(case, tmp, args, tmp)

    def case_manifest(self, case, rng, mutator, tmp):
        source = rng.choice(self.manifests)
        manifest = self.write(tmp, "m.json", mutator.mutate(json.loads(source.read_text())))
        args = ["plan", manifest, "--dp", rng.choice(["1", "2", "4", "8", "24", "64", "1048576"]),
                "--strategy", rng.choice(["sequential-dp", "layerwise", "unpadded"]),
                "--packer", rng.choice(["megatron", "balanced"]), "-q", "-o", tmp / "l.json"]
        args += rng.choice([[], ["--bucket-size", rng.choice(["1", "64", "1000", "none"])],
                            ["--expert-dp", "2"], ["--pad-for-high-nccl-busbw"]])
        result = self.run(case, tmp, args, tmp)
        if result is not None and result.returncode == 0:
            seed_layout, _ = rng.choice(self.layouts)
            self.readers(case, rng, tmp, tmp / "l.json", manifest, seed_layout)

    def case_layout(self, case, rng, mutator, tmp):
        seed_layout, manifest = rng.choice(self.layouts)
        layout = self.write(tmp, "l.json",
                            mutator.mutate(json.loads(seed_layout.read_text()), layout=True))
        self.readers(case, rng, tmp, layout, manifest, seed_layout)

    def case_layout_manifest(self, case, rng, mutator, tmp):
        seed_layout, source = rng.choice(self.layouts)
        manifest = self.write(tmp, "m.json", mutator.mutate(json.loads(source.read_text())))
        self.readers(case, rng, tmp, seed_layout, manifest, seed_layout)

    def case_config(self, case, rng, mutator, tmp):
        source = rng.choice(self.configs)
        config = self.write(tmp, "config.json", mutator.mutate(json.loads(source.read_text())))
        args = ["synth", config, "-q", "-o", tmp / "m.json"]
        args += rng.choice([[], ["--tp", "2"], ["--pp", "2", "--stage", "1"], ["--ep", "8"],
                            ["--tp", "8", "--etp", "1", "--ep", "2"], ["--dtype", "float32"]])
        result = self.run(case, tmp, args, tmp)
        if result is None or result.returncode != 0:
            return
        params = json.loads((tmp / "m.json").read_text())["params"]
        if len(params) > 3000:  # planning big models is the benchmarks' job
            return
        self.run(case, tmp, ["plan", tmp / "m.json", "--dp", rng.choice(["2", "8", "64"]),
                             "--strategy", rng.choice(["sequential-dp", "layerwise"]), "-q",
                             "-o", tmp / "l.json"], tmp)

    def case_job(self, case, rng, mutator, tmp):
        """A Megatron-LM launch line, mutated: arguments dropped, repeated, given odd values,
        pipeline layouts and layer lists garbled; on its own or with a config."""
        args = list(rng.choice(JOB_LINES))
        for _ in range(rng.randint(1, 6)):
            action = rng.random()
            if action < 0.3 and args:
                del args[rng.randrange(len(args))]
            elif action < 0.6:
                args.insert(rng.randrange(len(args) + 1), rng.choice(JOB_FLAGS))
            elif action < 0.85 and args:
                args[rng.randrange(len(args))] = str(rng.choice(INTEGERS + ARGV_STRINGS + JOB_VALUES))
            else:
                args += [rng.choice(JOB_FLAGS), str(rng.choice(INTEGERS + JOB_VALUES))]
        command = ["job", "--world-size", str(rng.choice([1, 2, 8, 16, 64, 1024, 3, 2 ** 24])),
                   "-o", tmp / "job"]
        if rng.random() < 0.3:
            source = rng.choice(self.configs)
            config = mutator.mutate(json.loads(source.read_text())) if rng.random() < 0.5 \
                else source.read_bytes()
            command += ["--hf-config", self.write(tmp, "config.json", config)]
            args = [a for a in args if a not in ("--num-layers", "--hidden-size")]
        self.run(case, tmp, command + ["--"] + args, tmp)


JOB_LINES = [
    ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--vocab-size",
     "1000", "--max-position-embeddings", "128", "--pipeline-model-parallel-size", "2",
     "--use-distributed-optimizer", "--overlap-grad-reduce", "--bf16"],
    ["--num-layers", "8", "--hidden-size", "64", "--num-attention-heads", "8",
     "--group-query-attention", "--num-query-groups", "2", "--swiglu", "--vocab-size", "5000",
     "--position-embedding-type", "rope", "--num-experts", "8", "--moe-layer-freq",
     "([0]*2+[1]*6)", "--expert-model-parallel-size", "2", "--pipeline-model-parallel-size",
     "2", "--num-virtual-stages-per-pipeline-rank", "2", "--optimizer", "muon",
     "--use-distributed-optimizer"],
    ["--num-layers", "6", "--hidden-size", "64", "--num-attention-heads", "4", "--vocab-size",
     "999", "--position-embedding-type", "rope", "--pipeline-model-parallel-size", "2",
     "--pipeline-model-parallel-layout", "Et*2|t*2|(t|)*2L", "--mtp-num-layers", "1"],
    ["--hybrid-override-pattern", "M*-M|E-M*", "--hidden-size", "128", "--num-attention-heads",
     "4", "--num-experts", "4", "--vocab-size", "1000", "--position-embedding-type", "none",
     "--mamba-num-groups", "2", "--pipeline-model-parallel-size", "2", "--disable-bias-linear"],
    ["--pipeline-model-parallel-size", "4", "--expert-model-parallel-size", "8",
     "--tensor-model-parallel-size", "2", "--bf16", "--use-distributed-optimizer",
     "--decoder-first-pipeline-num-layers", "3"],
]
JOB_FLAGS = ["--num-layers", "--hidden-size", "--num-attention-heads", "--vocab-size",
             "--tensor-model-parallel-size", "--pipeline-model-parallel-size",
             "--context-parallel-size", "--expert-model-parallel-size",
             "--expert-tensor-parallel-size", "--num-virtual-stages-per-pipeline-rank",
             "--num-layers-per-virtual-pipeline-stage", "--decoder-first-pipeline-num-layers",
             "--decoder-last-pipeline-num-layers", "--account-for-embedding-in-pipeline-split",
             "--account-for-loss-in-pipeline-split", "--pipeline-model-parallel-layout",
             "--mtp-num-layers", "--num-experts", "--moe-layer-freq", "--moe-ffn-hidden-size",
             "--ddp-bucket-size", "--ddp-num-buckets", "--num-distributed-optimizer-instances",
             "--multi-latent-attention", "--q-lora-rank", "--kv-lora-rank",
             "--hybrid-override-pattern", "--mamba-num-heads", "--ffn-hidden-size",
             "--kv-channels", "--make-vocab-size-divisible-by", "--padded-vocab-size", "--fp16",
             "--optimizer", "--overlap-param-gather", "--experimental-attention-variant",
             "--linear-attention-freq", "--softmax-type", "--lr", "x", "-", "--"]
ARGV_STRINGS = [s for s in STRINGS if "\0" not in s]  # argv cannot hold a NUL
JOB_VALUES = ["Et*3|(tt|)*29m|L", "(t|)*99999999L", "E|L", "Et|", "((t)*2)*3", "t*", "M*-E|/*E",
              "/", "([1]*4)", "[1,0", "([0]*3+[1]*58)", "9*[1]", "muon", "dist_muon", "gdn",
              "learnable", "1e9", "0x10", "-5", "2147483648"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("root", type=Path)
    parser.add_argument("--cases", type=int, default=300)
    parser.add_argument("--seed", default="paramlayout")
    parser.add_argument("--only", type=int, help="run this case alone")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--keep", type=Path, help="where failing cases' inputs are copied")
    a = parser.parse_args()
    keep = a.keep or Path(tempfile.mkdtemp(prefix="paramlayout-fuzz-failures-"))
    fuzzer = Fuzzer(os.path.abspath(a.binary), a.root.resolve(), a.seed, keep)
    cases = [a.only] if a.only is not None else range(a.cases)
    try:
        with ThreadPoolExecutor(a.jobs) as pool:
            list(pool.map(fuzzer.case, cases))
    finally:
        shutil.rmtree(fuzzer.work, ignore_errors=True)
    codes = ", ".join(f"exit {k}: {v}" for k, v in sorted(fuzzer.codes.items()))
    print(f"fuzz: seed {a.seed!r}, {len(cases)} cases, {fuzzer.runs} runs ({codes}), "
          f"{len(fuzzer.failures)} failures")
    for failure in fuzzer.failures[:20]:
        print(failure)
    if fuzzer.failures:
        print(f"the failing cases' inputs are in {keep}; rerun one with --seed {a.seed} "
              f"--only N")
        return 1
    shutil.rmtree(keep, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
