#!/usr/bin/env python3
"""Megatron-LM's emerging optimizers as the judge of `job`'s optimizer state.

    optimizer_state_judge.py BINARY

For each emerging optimizer (Muon, adaptive Muon, Lion, SOAP; Muon with Lion for the rest),
`job` plans a small float32 GPT at world size 1 without the distributed optimizer (every
param whole on the rank, no master copies). The judge then takes the chunk's params (names,
shapes and attributes from the manifest), routes each by Megatron-LM's own default param
overrides (emerging_optimizers.py: which params go to Adam), builds Megatron-LM's optimizer
classes (TensorParallelMuon, TensorParallelAdaptiveMuon and the emerging_optimizers registry's
Lion and SOAP, at the version Megatron-LM pins) over them, initializes their state with
Megatron-LM's _eopt_init_state_fn, and counts the state tensors' bytes. Params routed to Adam
are charged what Megatron-LM's init_state_fn for Adam allocates (exp_avg and exp_avg_sq,
zeros_like each param, optimizer/__init__.py:597-598), to Lion Lion's own _init_group.
The two totals must agree.

Then --optimizer-offload-fraction: for a small bf16 job at world size 1 with the CPU offload,
Megatron-LM's own _get_param_groups (under its standard overrides, on a one-rank gloo group)
puts the chunk's params in their groups, each group's params in buffer order (the distributed
optimizer's, distrib_optimizer.py:330-337, float32 before 16-bit, :485-495), and Megatron-LM's
HybridDeviceOptimizer._get_sub_optimizer_param_groups splits them (params standing in for
CUDA tensors); what stays on the GPU, 12 bytes per element (a float32 main param and two
float32 moments), must be job's figure.

Last, --no-use-layer-wise-param-layout: for a small bf16 job with the distributed optimizer at
several world sizes, Megatron-LM's _get_param_groups (the standard overrides and the emerging
optimizer's routing, as _get_megatron_emerging_optimizer merges them) and the layer-wise
optimizer's own _shard_params_ping_pong deal the params out; each rank's state (Megatron-LM's
optimizers' as above, plus a float32 main param per element, optimizer.py:1010-1012) at its
heaviest rank must be job's figure.

Run with any python3: it runs itself again in tools/megatron-env.sh's python; exit 77 (skipped)
with the reason where that environment cannot be made. Exit 0 all agree, 1 a difference.
"""
import copy
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from real_model_suite import judge_binary  # noqa: E402

MODEL = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--ffn-hidden-size", "96", "--max-position-embeddings", "128", "--vocab-size", "500",
         "--untie-embeddings-and-output-weights"]
FRACTIONS = [0.0, 0.3, 0.5, 0.9]
DEALS = [
    (2, ["--optimizer", "muon"]),
    (3, ["--optimizer", "muon", "--decoupled-lr", "1e-4"]),
    (4, ["--optimizer", "soap"]),
    (5, ["--optimizer", "adaptive_muon", "--apply-wd-to-qk-layernorm", "--qk-layernorm"]),
    (3, ["--optimizer", "lion"]),
]
CASES = [
    ["--optimizer", "muon"],
    ["--optimizer", "muon", "--muon-scalar-optimizer", "lion"],
    ["--optimizer", "adaptive_muon"],
    ["--optimizer", "lion"],
    ["--optimizer", "soap"],
]


def job(binary, args):
    """`job` at world size 1: its chunk's optimizer bytes and manifest params."""
    out = Path(tempfile.mkdtemp(prefix="optimizer-state-judge-")) / "job"
    subprocess.run([binary, "job", "--world-size", "1", "-q", "-o", str(out), "--"] + args,
                   check=True)
    record = json.loads((out / "job.json").read_text())
    chunk = record["chunks"][0]
    manifest = json.loads((out / "stage0.chunk0.manifest.json").read_text())
    return chunk["bytes_per_rank"]["optimizer"], manifest["params"]


def megatron_state_bytes(args, params):
    import torch
    from megatron.core.optimizer import emerging_optimizers as eo
    from megatron.core.optimizer.optimizer_config import OptimizerConfig

    name = args[args.index("--optimizer") + 1]
    scalar = args[args.index("--muon-scalar-optimizer") + 1] if "--muon-scalar-optimizer" in \
        args else "adam"
    config = OptimizerConfig(optimizer=name, lr=1e-3, muon_scalar_optimizer=scalar)
    # _get_megatron_emerging_optimizer's routing (optimizer/__init__.py:805-814): the registry
    # entry's default overrides, the Muon family's fallback replaced by muon_scalar_optimizer.
    overrides = copy.deepcopy(eo._EMERGING_OPTIMIZERS[name].default_param_overrides)
    if name in ("muon", "adaptive_muon"):
        for override in overrides.values():
            if override.get("optimizer") in ("adam", "lion"):
                override["optimizer"] = config.muon_scalar_optimizer
    groups = {}
    for p in params:
        tensor = torch.nn.Parameter(torch.zeros(p["shape"], dtype=torch.float32))
        tensor.is_embedding_or_output_parameter = p.get("embedding_or_output", False)
        tensor.use_muon = p.get("use_muon", True)
        chosen = name
        for key, override in overrides.items():
            if key.matches(tensor, p["name"]):
                chosen = override["optimizer"]
        groups.setdefault(chosen, []).append(tensor)

    total = 0
    for chosen, tensors in groups.items():
        if chosen == "adam":
            total += sum(2 * t.numel() * t.element_size() for t in tensors)
            continue
        group = [{"params": tensors}]
        if chosen == name:
            optimizer = eo._EMERGING_OPTIMIZERS[name].optimizer_cls(group, lr=1e-3)
        else:
            from emerging_optimizers.scalar_optimizers import Lion
            optimizer = Lion(group, lr=1e-3)
        eo._eopt_init_state_fn(optimizer)
        for state in optimizer.state.values():
            total += sum(v.numel() * v.element_size() for v in state.values()
                         if isinstance(v, torch.Tensor))
    return total, {k: len(v) for k, v in groups.items()}


class CudaStandIn:
    """What _get_sub_optimizer_param_groups reads of a CUDA param: numel, dtype, is_cuda, and
    the copies it makes (detach, clone, cpu, pin_memory, float)."""

    def __init__(self, numel, dtype, is_cuda=True):
        self._numel, self.dtype, self.is_cuda = numel, dtype, is_cuda

    def numel(self):
        return self._numel

    def detach(self):
        return self

    def clone(self):
        return CudaStandIn(self._numel, self.dtype, self.is_cuda)

    def cpu(self):
        return CudaStandIn(self._numel, self.dtype, False)

    def pin_memory(self):
        return self

    def float(self):
        import torch
        return CudaStandIn(self._numel, torch.float32, self.is_cuda)


class ManifestChunk:
    """A model chunk of bfloat16 tensors shaped as a manifest's params, with the attributes
    Megatron-LM's optimizer builder reads (allreduce, is_embedding_or_output_parameter,
    use_muon)."""

    def __init__(self, manifest):
        import torch
        self.tensors = []
        for p in manifest:
            t = torch.nn.Parameter(torch.zeros(p["shape"], dtype=torch.bfloat16))
            t.allreduce = not p.get("expert_parallel", False)
            t.is_embedding_or_output_parameter = p.get("embedding_or_output", False)
            t.use_muon = p.get("use_muon", True)
            self.tensors.append((p["name"], t))

    def named_parameters(self):
        return iter(self.tensors)


def offload_kept_bytes(binary, fraction):
    """job's optimizer bytes and Megatron-LM's, for the offload fraction."""
    import torch
    from megatron.core.optimizer import _get_param_groups, get_standard_config_overrides
    from megatron.core.optimizer.cpu_offloading.hybrid_optimizer import HybridDeviceOptimizer
    from megatron.core.optimizer.optimizer_config import OptimizerConfig

    out = Path(tempfile.mkdtemp(prefix="optimizer-state-judge-")) / "job"
    args = MODEL + ["--bf16", "--use-distributed-optimizer", "--use-precision-aware-optimizer",
                    "--optimizer-cpu-offload", "--optimizer-offload-fraction", str(fraction)]
    subprocess.run([binary, "job", "--world-size", "1", "-q", "-o", str(out), "--"] + args,
                   check=True)
    ours = json.loads((out / "job.json").read_text())["chunks"][0]["bytes_per_rank"]["optimizer"]
    manifest = json.loads((out / "stage0.chunk0.manifest.json").read_text())["params"]
    layout = json.loads((out / "stage0.chunk0.layout.json").read_text())
    position = {}
    for b, buffer in enumerate(layout["buffers"]):
        for p in buffer["params"]:
            position[p["name"]] = (b, p["start"])

    chunk = ManifestChunk(manifest)
    name_of = {id(t): n for n, t in chunk.tensors}
    config = OptimizerConfig(optimizer="adam", lr=1e-3, bf16=True)
    groups = _get_param_groups([chunk], config, get_standard_config_overrides(config))
    hybrid = HybridDeviceOptimizer.__new__(HybridDeviceOptimizer)
    hybrid.param_update_in_fp32 = True
    hybrid.pin_cpu_params = True
    hybrid.param_groups = []
    for group in groups:
        ordered = sorted(group["params"], key=lambda t: (t.dtype != torch.float32,
                                                         position[name_of[id(t)]]))
        hybrid.param_groups.append(
            {"params": [CudaStandIn(t.numel(), t.dtype) for t in ordered]})
    _, gpu_groups, *_ = hybrid._get_sub_optimizer_param_groups(fraction)
    kept = sum(p.numel() for g in gpu_groups for p in g["params"])
    return ours, 12 * kept, [len(g["params"]) for g in groups]


def state_of(name, scalar, tensors_by_optimizer):
    """Bytes of state per param (by id) the optimizers allocate over float32 copies."""
    import torch
    from megatron.core.optimizer import emerging_optimizers as eo
    from emerging_optimizers.scalar_optimizers import Lion
    out = {}
    for chosen, tensors in tensors_by_optimizer.items():
        copies = [torch.zeros(t.shape, dtype=torch.float32) for t in tensors]
        if chosen == "adam":
            for t, c in zip(tensors, copies):
                out[id(t)] = 2 * c.numel() * c.element_size()
            continue
        group = [{"params": [torch.nn.Parameter(c) for c in copies]}]
        cls = eo._EMERGING_OPTIMIZERS[name].optimizer_cls if chosen == name else Lion
        optimizer = cls(group, lr=1e-3)
        eo._eopt_init_state_fn(optimizer)
        for t, p in zip(tensors, group[0]["params"]):
            out[id(t)] = sum(v.numel() * v.element_size()
                             for v in optimizer.state[p].values() if isinstance(v, torch.Tensor))
    return out


def dealt_bytes(binary, world, extra):
    """job's optimizer bytes and Megatron-LM's heaviest rank's, without the layer-wise layout."""
    import copy as copy_module
    import torch
    from megatron.core.optimizer import (_get_param_groups, emerging_optimizers as eo,
                                         get_standard_config_overrides)
    from megatron.core.optimizer.layer_wise_optimizer import LayerWiseDistributedOptimizer
    from megatron.core.optimizer.optimizer_config import OptimizerConfig

    args = MODEL + ["--bf16", "--use-distributed-optimizer", "--no-use-layer-wise-param-layout"] \
        + extra
    out = Path(tempfile.mkdtemp(prefix="optimizer-state-judge-")) / "job"
    subprocess.run([binary, "job", "--world-size", str(world), "-q", "-o", str(out), "--"] + args,
                   check=True)
    ours = json.loads((out / "job.json").read_text())["chunks"][0]["bytes_per_rank"]["optimizer"]
    manifest = json.loads((out / "stage0.chunk0.manifest.json").read_text())["params"]
    name = args[args.index("--optimizer") + 1]
    decoupled = float(args[args.index("--decoupled-lr") + 1]) if "--decoupled-lr" in args \
        else None

    chunk = ManifestChunk(manifest)
    config = OptimizerConfig(optimizer=name, lr=1e-3, bf16=True, decoupled_lr=decoupled,
                             apply_wd_to_qk_layernorm="--apply-wd-to-qk-layernorm" in args)
    overrides = get_standard_config_overrides(config)
    defaults = copy_module.deepcopy(eo._EMERGING_OPTIMIZERS[name].default_param_overrides)
    if name in ("muon", "adaptive_muon"):
        for override in defaults.values():
            if override.get("optimizer") in ("adam", "lion"):
                override["optimizer"] = config.muon_scalar_optimizer
    overrides.update(defaults)  # as optimizer/__init__.py:815 merges them
    by_optimizer = {}
    for group in _get_param_groups([chunk], config, overrides):
        by_optimizer.setdefault(group.get("optimizer", name), []).append(group)

    class Optimizer:
        def __init__(self, groups):
            self.param_groups = groups

    class Group:
        def __init__(self, size):
            self._size = size

        def size(self):
            return self._size

        def rank(self):
            return 0

    tensors = {k: [t for g in groups for t in g["params"]] for k, groups in by_optimizer.items()}
    state = state_of(name, "adam", tensors)
    deal = LayerWiseDistributedOptimizer.__new__(LayerWiseDistributedOptimizer)
    deal.dp_cp, deal.expt_dp = Group(world), Group(world)
    deal._shard_params_ping_pong([Optimizer(g) for g in by_optimizer.values()], world, world)
    per_rank = [sum(state[id(t)] + 4 * t.numel() for t in ts) for ts in deal.dp_cp_params_list]
    return ours, max(per_rank)


def main():
    binary = judge_binary(__doc__, __file__)
    if isinstance(binary, int):
        return binary
    failed = 0
    for case in CASES:
        args = MODEL + case
        ours, params = job(binary, args)
        theirs, routed = megatron_state_bytes(args, params)
        verdict = "agree" if ours == theirs else "DIFFER"
        failed += ours != theirs
        print(f"{' '.join(case)}: paramlayout {ours} B, Megatron-LM {theirs} B "
              f"(params per optimizer {routed}): {verdict}")
    import torch
    import torch.distributed as dist
    with tempfile.NamedTemporaryFile() as store:
        dist.init_process_group("gloo", init_method=f"file://{store.name}", rank=0, world_size=1)
        for fraction in FRACTIONS:
            ours, theirs, group_sizes = offload_kept_bytes(binary, fraction)
            verdict = "agree" if ours == theirs else "DIFFER"
            failed += ours != theirs
            print(f"--optimizer-offload-fraction {fraction}: paramlayout {ours} B on the GPU, "
                  f"Megatron-LM {theirs} B (params per group {group_sizes}): {verdict}")
        for world, extra in DEALS:
            ours, theirs = dealt_bytes(binary, world, extra)
            verdict = "agree" if ours == theirs else "DIFFER"
            failed += ours != theirs
            print(f"--no-use-layer-wise-param-layout at world {world} {' '.join(extra)}: "
                  f"paramlayout {ours} B, Megatron-LM {theirs} B: {verdict}")
        dist.destroy_process_group()
    total = len(CASES) + len(FRACTIONS) + len(DEALS)
    print(f"optimizer-state judge: {total - failed}/{total} agree")
    return 1 if failed else 0  # noqa


if __name__ == "__main__":
    sys.exit(main())
