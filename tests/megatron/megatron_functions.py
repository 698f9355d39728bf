"""Megatron-LM's own per-buffer layout functions, read at run time from a Megatron-LM
checkout (a work tree, or a bare git directory), for tests and benchmarks to compare
paramlayout with.

Nothing of Megatron-LM is copied into this project: the functions' source is read from the
checkout and run with their torch-specific parts stood in for by plain Python (params are
objects with the attributes the functions read). Grouping params into buffers is done here,
by the rules of docs/strategies.md, Grouping params into buffers.

    sequential_dp, layerwise = load_functions(checkout)
    for is_layerwise, is_expert, params in buffers(manifest, strategy): ...
"""
import ast
import json
import logging
import math
import sys
import textwrap
import types
import typing
from pathlib import Path

from megatron_checkout import read_source


def method_source(module_source, class_name, method_name):
    tree = ast.parse(module_source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method_name:
                    item.decorator_list = []
                    return textwrap.dedent(ast.unparse(item))
    raise SystemExit(f"{class_name}.{method_name} not found")


def stub_torch():
    torch = types.ModuleType("torch")
    torch.dtype = str
    torch.uint8, torch.float = "uint8", "float32"
    torch.nn = types.SimpleNamespace(Parameter=object)
    return torch


class Data:
    def __init__(self, shape, numel):
        self.shape, self._numel = shape, numel

    def nelement(self):
        return self._numel


class Param:
    """Stands in for torch.nn.Parameter with the attributes the layout functions read."""

    def __init__(self, p):
        shape = p["shape"]
        self.data = Data(tuple(shape), math.prod(shape))
        self._dim = len(shape)
        self.shared_embedding = p.get("shared_embedding", False)
        if p.get("gtp_remat_size", 1) > 1:
            self.is_gtp_weight_remat, self.gtp_remat_size = True, p["gtp_remat_size"]

    def dim(self):
        return self._dim


def load_functions(checkout):
    namespace = {"torch": stub_torch(), "math": math, "logging": logging,
                 "logger": logging.getLogger("megatron_functions"),
                 "log_single_rank": lambda *args, **kwargs: None}
    namespace.update({name: getattr(typing, name) for name in ("Dict", "List", "Optional", "Tuple")})
    sys.modules.setdefault("torch", namespace["torch"])
    exec(read_source(checkout, "megatron/core/optimizer/param_layout.py"), namespace)
    distopt = read_source(checkout, "megatron/core/optimizer/distrib_optimizer.py")
    layerwise = read_source(checkout, "megatron/core/optimizer/layer_wise_optimizer.py")
    exec(method_source(distopt, "DistributedOptimizer", "_compute_per_buffer_param_layout")
         .replace("def _compute_per_buffer_param_layout", "def sequential_dp"), namespace)
    exec(method_source(layerwise, "LayerWiseDistributedOptimizer", "_shard_divisor"), namespace)
    namespace["LayerWiseDistributedOptimizer"] = types.SimpleNamespace(
        _shard_divisor=namespace["_shard_divisor"])
    exec(method_source(layerwise, "LayerWiseDistributedOptimizer",
                       "_compute_per_buffer_param_layout")
         .replace("def _compute_per_buffer_param_layout", "def layerwise"), namespace)
    return namespace["sequential_dp"], namespace["layerwise"]


def buffers(manifest, strategy):
    """Params per buffer, as Megatron-LM groups them: (layerwise, expert, params)."""
    groups = {}
    for p in manifest["params"]:
        layerwise = (strategy == "layerwise" and p.get("use_muon", True)
                     and len(p["shape"]) == 2 and not p.get("embedding_or_output", False))
        key = (p["dtype"] if p.get("storage", "dense") == "dense" else "uint8", p["dtype"],
               p.get("expert_parallel", False), layerwise)
        groups.setdefault(key, []).append(Param(p))
    return [(key[3], key[2], params) for key, params in groups.items()]


def same_layout(results, layout_path):
    buffers_out = json.loads(Path(layout_path).read_text())["buffers"]
    if len(buffers_out) != len(results):
        return False
    for result, buffer in zip(results, buffers_out):
        ours = sorted((p["start"], p["end"], p["bucket"]) for p in buffer["params"])
        theirs = sorted(result.param_index_map.values())
        buckets = [(b["start"], b["end"]) for b in buffer["buckets"]]
        if ours != theirs or buckets != [tuple(b) for b in result.bucket_indices]:
            return False
    return True
