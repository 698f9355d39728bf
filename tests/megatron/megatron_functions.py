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
        self.name, self.storage = p["name"], p.get("storage", "dense")
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


def buffers(manifest, strategy, fp32_grads=False, with_key=False):
    """Params per buffer, as Megatron-LM groups them: (layerwise, expert, params), or with
    `with_key`, ((param_dtype, grad_dtype, expert, layerwise), params)."""
    groups = {}
    for p in manifest["params"]:
        layerwise = (strategy == "layerwise" and p.get("use_muon", True)
                     and len(p["shape"]) == 2 and not p.get("embedding_or_output", False))
        key = (p["dtype"] if p.get("storage", "dense") == "dense" else "uint8",
               "float32" if fp32_grads else p["dtype"], p.get("expert_parallel", False),
               layerwise)
        groups.setdefault(key, []).append(Param(p))
    if with_key:
        return list(groups.items())
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


class _FakeTensor:
    """A 1-D tensor of `numel` elements of `dtype` at `offset` bytes into allocation
    `storage`: enough for DDP's buffer allocation (param_and_grad_buffer.py:1160-1192)."""

    SIZES = {"float32": 4, "bfloat16": 2, "float16": 2, "uint8": 1}

    def __init__(self, storage, numel, dtype, offset=0):
        self.storage, self.numel_, self.dtype, self.offset = storage, numel, dtype, offset

    def element_size(self):
        return self.SIZES[self.dtype]

    def __getitem__(self, key):
        start, stop = key.start or 0, min(key.stop, self.numel_)
        return _FakeTensor(self.storage, stop - start, self.dtype,
                           self.offset + start * self.element_size())

    def view(self, dtype):
        return _FakeTensor(self.storage, self.numel_ * self.element_size() // self.SIZES[dtype],
                           dtype, self.offset)


def _allocation_torch(allocations):
    """torch as DDP's buffer allocation uses it: zeros() records each allocation's bytes."""
    torch = types.SimpleNamespace(float32="float32", bfloat16="bfloat16", float16="float16",
                                  uint8="uint8")
    torch.cuda = types.SimpleNamespace(current_device=lambda: 0)

    def zeros(numel, dtype, device=None, requires_grad=False):
        allocations.append(numel * _FakeTensor.SIZES[dtype])
        return _FakeTensor(len(allocations) - 1, numel, dtype)

    torch.zeros = zeros
    return torch


def load_param_buffer(checkout):
    """Megatron-LM's own code for where DDP keeps a buffer's params: the allocation block of
    _ParamAndGradBuffer.__init__ (param_and_grad_buffer.py:1160-1192, mxfp8 params' param
    buffer in the grad buffer) and _compute_nvfp4_packed_layout (1437-1522), with
    get_nvfp4_rowwise_packed_shape (fp4_utils.py:70-77), which DDP calls for each NVFP4
    param it maps (param_and_grad_buffer.py:1270).

    Returns param_buffer(params, names, dp, pad, result): a dict with the bytes DDP
    allocates for params apart from grads ("params"), for grads ("grads"), the bytes its
    all-gathers output ("all_gather"), and for nvfp4, the packed buckets and each param's
    packed range by name; or None where Megatron-LM fails (an assertion).
    """
    import contextlib
    source = read_source(checkout, "megatron/core/distributed/param_and_grad_buffer.py")
    fp4_source = read_source(checkout, "megatron/core/fp4_utils.py")
    namespace = {"math": math, "torch": stub_torch(), "logging": logging,
                 "logger": logging.getLogger("megatron_functions"),
                 **{name: getattr(typing, name) for name in ("Dict", "List", "Optional", "Tuple")}}
    sys.modules.setdefault("torch", namespace["torch"])
    exec(read_source(checkout, "megatron/core/optimizer/param_layout.py"), namespace)
    exec(method_source(source, "_ParamAndGradBuffer", "_compute_nvfp4_packed_layout"), namespace)
    tree = ast.parse(fp4_source)
    shape_fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef)
                    and n.name == "get_nvfp4_rowwise_packed_shape")
    init = ast.parse(method_source(source, "_ParamAndGradBuffer", "__init__"))
    block = next(n for n in ast.walk(init) if isinstance(n, ast.With)
                 and ast.unparse(n.items[0].context_expr) == "mem_alloc_context()")
    allocate = "def allocate(self, mem_alloc_context):\n" + textwrap.indent(ast.unparse(block), "    ")
    namespace.update(
        is_nvfp4tensor=lambda p: p.storage == "nvfp4",
        is_grouped_nvfp4tensor=lambda p: False,
        is_mxfp8tensor=lambda p: p.storage == "mxfp8",
        is_grouped_mxfp8tensor=lambda p: False)
    exec(allocate, namespace)
    shape_namespace = {"torch": types.SimpleNamespace(Size=tuple)}
    exec(ast.unparse(shape_fn), shape_namespace)

    def param_buffer(params, dp, pad, result, grad_dtype, param_dtype):
        self = types.SimpleNamespace(
            ddp_config=types.SimpleNamespace(use_distributed_optimizer=True,
                                             pad_buckets_for_high_nccl_busbw=pad),
            data_parallel_world_size=dp, param_index_map=result.param_index_map,
            bucket_indices=result.bucket_indices, params=params, grad_dtype=grad_dtype,
            param_dtype=param_dtype, numel=result.bucket_indices[-1][1],
            has_nvfp4_params=any(p.storage == "nvfp4" for p in params))
        try:
            if self.has_nvfp4_params:
                namespace["_compute_nvfp4_packed_layout"](self, [(p, p.name) for p in params])
                self.nvfp4_packed_numel = self.nvfp4_packed_bucket_indices[-1][1]
                for p in params:
                    if p.storage == "nvfp4":
                        shape_namespace["get_nvfp4_rowwise_packed_shape"](p.data.shape)
        except AssertionError:
            return None
        allocations = []
        namespace["torch"] = _allocation_torch(allocations)
        namespace["allocate"](self, contextlib.nullcontext)
        buckets = (self.nvfp4_packed_bucket_indices if self.has_nvfp4_params
                   else result.bucket_indices)
        out = {"grads": allocations[self.grad_data.storage],
               "params": sum(a for i, a in enumerate(allocations) if i != self.grad_data.storage),
               # _new_bucket (1590-1600): each bucket's param_data view is all-gathered.
               "all_gather": sum(e - s for s, e in buckets) * self.param_data.element_size()}
        if self.has_nvfp4_params:
            out["packed_buckets"] = [tuple(b) for b in self.nvfp4_packed_bucket_indices]
            out["packed_params"] = {p.name: tuple(v[:2])
                                    for p, v in self.nvfp4_packed_param_index_map.items()}
        return out

    return param_buffer
