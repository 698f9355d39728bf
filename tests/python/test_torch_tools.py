#!/usr/bin/env python3
"""The Python package's torch ends, paramlayout.from_torch and paramlayout.megatron (python/),
on a real torch model, with the built paramlayout planning and checking what they produce.

Exits 77 (skipped, with the reason) when torch cannot be imported.
Usage: test_torch_tools.py PARAMLAYOUT SOURCE_ROOT
"""
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Dict, List, Optional, Tuple

try:
    import torch
except ImportError as e:
    print(f"SKIP: torch is not importable by {sys.executable}: {e}")
    sys.exit(77)

BINARY = os.path.abspath(sys.argv[1])
ROOT = Path(sys.argv[2]).resolve()
sys.path[:0] = [str(ROOT / "python"), str(Path(__file__).resolve().parent)]

import tiny_model  # noqa: E402
from paramlayout import from_torch  # noqa: E402
from paramlayout import megatron as paramlayout_megatron  # noqa: E402


def run(*args, **kwargs):
    return subprocess.run([*map(str, args)], capture_output=True, text=True, timeout=300,
                          **kwargs)


def plan(tmp, manifest_dict, *args):
    manifest = Path(tmp, "manifest.json")
    manifest.write_text(json.dumps(manifest_dict))
    layout = Path(tmp, "layout.json")
    result = run(BINARY, "plan", manifest, "-q", "-o", layout, *args)
    assert result.returncode == 0, result.stderr
    return manifest, layout


# Stand-ins with the fields of megatron.core.optimizer.param_layout's classes.
@dataclasses.dataclass(frozen=True)
class BufferKey:
    param_dtype: torch.dtype
    grad_dtype: torch.dtype
    is_expert_parallel: bool
    is_managed_by_layer_wise_optimizer: bool = False


@dataclasses.dataclass
class PerBufferParamLayout:
    param_index_map: Dict[torch.nn.Parameter, Tuple[int, int, int]] = dataclasses.field(
        default_factory=dict)
    bucket_indices: List[Tuple[int, int]] = dataclasses.field(default_factory=list)
    per_bucket_numel_unpadded: List[int] = dataclasses.field(default_factory=list)
    param_indices: List[int] = dataclasses.field(default_factory=list)
    num_optimizer_shards: Optional[int] = None


@dataclasses.dataclass
class FullParamLayout:
    layouts: Dict[BufferKey, PerBufferParamLayout] = dataclasses.field(default_factory=dict)


def classes():
    try:
        return paramlayout_megatron.megatron_classes()
    except ImportError:
        return BufferKey, PerBufferParamLayout, FullParamLayout


class TorchManifest(unittest.TestCase):
    def test_trainable_params_in_order_with_attributes(self):
        model = tiny_model.build()
        m = from_torch.manifest_from_module(model, "tiny")
        names = [e["name"] for e in m["params"]]
        expected = [n for n, p in model.named_parameters() if p.requires_grad]
        self.assertEqual(names, expected)
        self.assertNotIn("layers.0.norm.bias", names)
        entry = {e["name"]: e for e in m["params"]}
        self.assertEqual(entry["embedding.weight"],
                         {"name": "embedding.weight", "shape": [100, 64], "dtype": "bfloat16",
                          "embedding_or_output": True})
        self.assertTrue(entry["layers.1.experts.0"]["expert_parallel"])
        self.assertFalse(entry["layers.1.proj.weight"]["use_muon"])
        self.assertEqual(entry["layers.1.qkv.weight"]["gtp_remat_size"], 4)
        self.assertEqual(entry["layers.0.proj.weight"]["storage"], "fp8")
        self.assertEqual(entry["layers.0.qkv.bias"]["shape"], [192])
        self.assertEqual(m["model"], "tiny")

    def test_float32_and_unsupported_dtypes(self):
        self.assertEqual(from_torch.manifest_from_module(torch.nn.Linear(3, 2))["params"][0]
                         ["dtype"], "float32")
        with self.assertRaisesRegex(ValueError, "weight: dtype torch.float64"):
            from_torch.manifest_from_module(torch.nn.Linear(3, 2).double())

    def test_command_line_then_plan_and_check(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "manifest.json")
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                [str(ROOT / "python"), str(Path(__file__).resolve().parent)]))
            result = run(sys.executable, "-m", "paramlayout.from_torch", "tiny_model:build",
                         "-o", out, env=env)
            self.assertEqual(result.returncode, 0, result.stderr)
            for strategy in ("sequential-dp", "layerwise"):
                layout = Path(tmp, f"{strategy}.json")
                result = run(BINARY, "plan", out, "--dp", "4", "--strategy", strategy, "-q",
                             "-o", layout)
                self.assertEqual(result.returncode, 0, result.stderr)
                keys = {(b["param_dtype"], b["expert_parallel"])
                        for b in json.loads(layout.read_text())["buffers"]}
                self.assertIn(("uint8", False), keys)  # the fp8 param's buffer
                self.assertIn(("bfloat16", True), keys)  # the experts'
                check = run(BINARY, "check", layout, "--manifest", out, "--replan")
                self.assertEqual(check.returncode, 0, check.stdout)
            bad = run(sys.executable, "-m", "paramlayout.from_torch", "tiny_model", env=env)
            self.assertEqual(bad.returncode, 2)
            self.assertIn("expected package.module:function", bad.stderr)


class MegatronLayout(unittest.TestCase):
    def setUp(self):
        self.model = tiny_model.build()
        self.tmp = tempfile.TemporaryDirectory()
        manifest = from_torch.manifest_from_module(self.model, "tiny")
        _, self.layout_path = plan(self.tmp.name, manifest, "--dp", "4", "--strategy",
                                   "layerwise", "--bucket-size", "10000")
        self.layout = json.loads(self.layout_path.read_text())

    def tearDown(self):
        self.tmp.cleanup()

    def test_every_param_at_its_offsets(self):
        full = paramlayout_megatron.full_param_layout(self.layout_path, self.model,
                                                      expect={"dp": 4}, classes=classes())
        params = dict(self.model.named_parameters())
        self.assertEqual(len(full.layouts), len(self.layout["buffers"]))
        placed = 0
        for b in self.layout["buffers"]:
            key = next(k for k in full.layouts
                       if k.is_expert_parallel == b["expert_parallel"]
                       and k.is_managed_by_layer_wise_optimizer == b["layerwise"]
                       and k.param_dtype == paramlayout_megatron.DTYPES[b["param_dtype"]])
            per = full.layouts[key]
            self.assertEqual(per.num_optimizer_shards, 4)
            self.assertEqual(per.bucket_indices, [(k["start"], k["end"]) for k in b["buckets"]])
            self.assertEqual(per.per_bucket_numel_unpadded,
                             [k["numel_unpadded"] for k in b["buckets"]])
            for p in b["params"]:
                self.assertIs(next(q for q in per.param_index_map if q is params[p["name"]]),
                              params[p["name"]])
                self.assertEqual(per.param_index_map[params[p["name"]]],
                                 (p["start"], p["end"], p["bucket"]))
                placed += 1
            # In model order, as Megatron-LM's group_params_for_buffers gives them (the layout
            # lists params by offset, backprop order).
            self.assertEqual(per.param_indices, sorted(p["index"] for p in b["params"]))
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.assertEqual(placed, len(trainable))

    def test_a_wrapped_chunk_is_matched_by_the_model_s_names(self):
        # Training hands DDP the chunk inside Float16Module, which holds it as `.module`.
        class Wrapper(torch.nn.Module):
            def __init__(self, module):
                super().__init__()
                self.module = module

        bare = paramlayout_megatron.full_param_layout(self.layout_path, self.model,
                                                      classes=classes())
        wrapped = paramlayout_megatron.full_param_layout(
            self.layout_path, Wrapper(Wrapper(self.model)), classes=classes())
        for key, per in bare.layouts.items():
            self.assertEqual(wrapped.layouts[key].param_index_map, per.param_index_map)
        self.assertEqual(len(wrapped.layouts), len(self.layout["buffers"]))

    def test_mismatches_are_listed(self):
        self.model.layers[1].qkv.weight = torch.nn.Parameter(torch.zeros(8, 64, dtype=torch.bfloat16))
        self.model.extra = torch.nn.Parameter(torch.zeros(3))
        with self.assertRaises(paramlayout_megatron.LayoutMismatch) as caught:
            paramlayout_megatron.full_param_layout(self.layout_path, self.model,
                                                   expect={"dp": 8}, classes=classes())
        message = str(caught.exception)
        self.assertIn("options.dp: the layout was planned with 4, the job uses 8", message)
        self.assertIn("param 'layers.1.qkv.weight': 12288 elements in the layout, 512 in the model",
                      message)
        self.assertIn("param 'extra': trainable in the model chunk, missing from the layout",
                      message)


def module_from_manifest(path):
    """A torch module whose trainable params have a manifest's names and shapes."""
    root = torch.nn.Module()
    for p in json.loads(Path(path).read_text())["params"]:
        *parents, leaf = p["name"].split(".")
        module = root
        for part in parents:
            if not hasattr(module, part):
                module.add_module(part, torch.nn.Module())
            module = getattr(module, part)
        param = torch.nn.Parameter(torch.zeros(p["shape"], dtype=getattr(torch, p["dtype"])))
        module.register_parameter(leaf, param)
    return root


class JobLayout(unittest.TestCase):
    def test_each_rank_loads_its_chunk(self):
        with tempfile.TemporaryDirectory() as tmp:
            job = run(BINARY, "job", "--world-size", "8", "-q", "-o", tmp, "--",
                      "--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
                      "--vocab-size", "1000", "--max-position-embeddings", "128",
                      "--pipeline-model-parallel-size", "2", "--bf16",
                      "--use-distributed-optimizer", "--overlap-grad-reduce")
            self.assertEqual(job.returncode, 0, job.stderr)
            job_path = Path(tmp, "job.json")
            chunk = module_from_manifest(Path(tmp, "stage1.chunk0.manifest.json"))
            full = paramlayout_megatron.job_param_layout(job_path, chunk, pp_rank=1,
                                                         classes=classes())
            placed = sum(len(per.param_index_map) for per in full.layouts.values())
            self.assertEqual(placed, len(list(chunk.parameters())))
            self.assertEqual({per.num_optimizer_shards for per in full.layouts.values()}, {4})
            with self.assertRaises(paramlayout_megatron.LayoutMismatch) as caught:
                paramlayout_megatron.job_param_layout(job_path, chunk, pp_rank=0,
                                                      classes=classes())
            self.assertIn("missing from the layout", str(caught.exception))
            with self.assertRaises(paramlayout_megatron.LayoutMismatch) as caught:
                paramlayout_megatron.job_param_layout(job_path, chunk, pp_rank=2,
                                                      classes=classes())
            self.assertIn("no chunk for pipeline stage 2", str(caught.exception))
            # A layout file that is not the one job.json names is refused, naming the chunk.
            layout = Path(tmp, "stage1.chunk0.layout.json")
            layout.write_text(layout.read_text() + " ")
            with self.assertRaises(paramlayout_megatron.LayoutMismatch) as caught:
                paramlayout_megatron.job_param_layout(job_path, chunk, pp_rank=1,
                                                      classes=classes())
            self.assertIn("stage1.chunk0: stage1.chunk0.layout.json is not the file",
                          str(caught.exception))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
