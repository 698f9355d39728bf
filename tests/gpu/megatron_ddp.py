#!/usr/bin/env python3
"""paramlayout's layouts in Megatron-LM's own DistributedDataParallel, on one GPU.

For a small model with Megatron-LM's attributes (embedding and output layer, expert-parallel
MLP, a float32 norm beside bfloat16 params), planned by `paramlayout plan` at dp 64 (expert
dp 8), three layouts:
  sequential-dp, layerwise (Megatron-LM's packer): the FullParamLayout the project's loader
      builds must equal Megatron-LM's own compute_full_param_layout on the same params;
  layerwise (the balanced packer): no equal in Megatron-LM, but DDP must take it too.
Then, for each, Megatron-LM's DistributedDataParallel is built on the GPU with that layout
(torch.distributed over NCCL, one rank), and after one forward and backward pass:
  - the bytes its param and grad buffers allocate equal the layout's bytes_per_rank;
  - every param's data and main_grad sit in the buffers at the layout's offsets;
  - every main_grad equals the gradient of the same model without DDP.

Megatron-LM is imported from DIR/megatron (tools/gpu-megatron.sh puts it there), the loader
from its file. Failures are reported as one clear line each (tracebacks go to
--traceback FILE). Exit status: 0 all agree, 1 something differs, 2 it could not run (no
GPU, no torch or Megatron-LM, a Megatron-LM API that changed).
Usage: megatron_ddp.py --paramlayout BIN --megatron DIR --loader FILE --work DIR
       [--traceback FILE] [--preflight]
"""
import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

DP, EXPERT_DP, BUCKET = 64, 8, 200_000
VOCAB, HIDDEN, FFN, EXPERT_FFN, LAYERS = 1024, 256, 1024, 512, 2
VARIANTS = [("sequential-dp", "sequential-dp", "megatron", "DistributedOptimizer"),
            ("layerwise", "layerwise", "megatron", "LayerWiseDistributedOptimizer"),
            ("layerwise-balanced", "layerwise", "balanced", None)]


class Unrunnable(Exception):
    """The step cannot run here (exit 2), with the reason."""


ARGS = None


@contextlib.contextmanager
def phase(what):
    """Turns any exception into one line naming the phase and where it was raised."""
    try:
        yield
    except (Unrunnable, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001 - every failure becomes a message
        frame = traceback.extract_tb(e.__traceback__)[-1]
        if ARGS and ARGS.traceback:
            with open(ARGS.traceback, "a") as f:
                f.write(f"--- {what}\n{traceback.format_exc()}\n")
        raise Unrunnable(f"{what} failed: {type(e).__name__}: {e} "
                         f"(at {Path(frame.filename).name}:{frame.lineno})") from None


def check_files(args):
    needed = [Path(args.megatron, "megatron/core/optimizer/param_layout.py"),
              Path(args.megatron, "megatron/core/distributed/distributed_data_parallel.py"),
              Path(args.loader), Path(args.paramlayout)]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        raise Unrunnable("missing: " + ", ".join(missing) +
                         " (tools/gpu-megatron.sh puts Megatron-LM's megatron/core in "
                         "build-carry/)")


def import_all(args):
    """(torch, Megatron-LM's modules, the loader)."""
    with phase("importing torch"):
        import torch
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    if version < (2, 6):
        raise Unrunnable(f"torch {torch.__version__} is too old for Megatron-LM (it needs 2.6 or "
                         f"newer)")
    sys.path.insert(0, str(Path(args.megatron).resolve()))
    with phase(f"importing Megatron-LM from {args.megatron}"):
        from megatron.core import parallel_state
        from megatron.core.distributed import (DistributedDataParallel,
                                               DistributedDataParallelConfig)
        from megatron.core.optimizer import param_layout
        from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer
        from megatron.core.optimizer.layer_wise_optimizer import (
            LayerWiseDistributedOptimizer, tag_params_for_buffer_routing)
        from megatron.core.transformer import TransformerConfig
    with phase(f"importing the loader {args.loader}"):
        spec = importlib.util.spec_from_file_location("paramlayout_megatron", args.loader)
        loader = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loader)
    mcore = dict(parallel_state=parallel_state, DDP=DistributedDataParallel,
                 DDPConfig=DistributedDataParallelConfig, param_layout=param_layout,
                 DistributedOptimizer=DistributedOptimizer,
                 LayerWiseDistributedOptimizer=LayerWiseDistributedOptimizer,
                 tag=tag_params_for_buffer_routing, TransformerConfig=TransformerConfig)
    return torch, mcore, loader


def build_model(torch, seed, device="cpu"):
    """The model, its init fixed by `seed`: Megatron-LM's attributes on its params."""
    nn = torch.nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(HIDDEN)
            self.linear_qkv = nn.Linear(HIDDEN, 3 * HIDDEN, bias=False)
            self.linear_proj = nn.Linear(HIDDEN, HIDDEN)
            self.linear_fc1 = nn.Linear(HIDDEN, FFN)
            self.linear_fc2 = nn.Linear(FFN, HIDDEN)
            self.expert_fc1 = nn.Linear(HIDDEN, EXPERT_FFN, bias=False)
            self.expert_fc2 = nn.Linear(EXPERT_FFN, HIDDEN, bias=False)
            for p in (*self.expert_fc1.parameters(), *self.expert_fc2.parameters()):
                p.allreduce = False  # expert-parallel: its own buffer and dp group

        def forward(self, x):
            q, k, v = self.linear_qkv(self.norm(x)).chunk(3, dim=-1)
            attention = torch.softmax(q @ k.transpose(-1, -2) / HIDDEN ** 0.5, dim=-1) @ v
            x = x + self.linear_proj(attention)
            gelu = torch.nn.functional.gelu
            return (x + self.linear_fc2(gelu(self.linear_fc1(x))) +
                    self.expert_fc2(gelu(self.expert_fc1(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(VOCAB, HIDDEN)
            self.layers = nn.ModuleList(Layer() for _ in range(LAYERS))
            self.final_norm = nn.LayerNorm(HIDDEN)
            self.output_layer = nn.Linear(HIDDEN, VOCAB, bias=False)
            for p in (self.embedding.weight, self.output_layer.weight):
                p.is_embedding_or_output_parameter = True

        def forward(self, tokens):
            x = self.embedding(tokens)
            for layer in self.layers:
                x = layer(x)
            x = self.final_norm(x.float()).to(torch.bfloat16)
            return self.output_layer(x).float().logsumexp(dim=-1).mean()

    torch.manual_seed(seed)
    model = Model().to(torch.bfloat16)
    model.final_norm.float()  # a second dtype, a second buffer
    return model.to(device)


def write_manifest(model, path):
    params = []
    for name, p in model.named_parameters():
        entry = {"name": name, "shape": list(p.shape), "dtype": str(p.dtype).split(".")[-1]}
        if getattr(p, "allreduce", True) is False:
            entry["expert_parallel"] = True
        if getattr(p, "is_embedding_or_output_parameter", False):
            entry["embedding_or_output"] = True
        params.append(entry)
    path.write_text(json.dumps({"schema": "paramlayout.manifest/v1", "model": "megatron-ddp",
                                "params": params}))


def plan(args, manifest, layout, strategy, packer):
    command = [args.paramlayout, "plan", str(manifest), "--dp", str(DP), "--expert-dp",
               str(EXPERT_DP), "--strategy", strategy, "--packer", packer, "--bucket-size",
               str(BUCKET), "--grad-reduce-in-fp32", "-q", "-o", str(layout)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise Unrunnable(f"paramlayout plan failed ({result.returncode}): {result.stderr.strip()}")
    return json.loads(layout.read_text())


def describe_key(key):
    return (f"{str(key.param_dtype).split('.')[-1]}/{str(key.grad_dtype).split('.')[-1]}"
            f"{' expert' if key.is_expert_parallel else ''}"
            f"{' layerwise' if key.is_managed_by_layer_wise_optimizer else ''}")


def short(value, limit=6):
    value = list(value)
    return str(value[:limit])[:-1] + (", ...]" if len(value) > limit else "]")


def layout_differences(ours, theirs, names):
    """How the loader's FullParamLayout differs from Megatron-LM's, one line each."""
    out = []
    if set(ours.layouts) != set(theirs.layouts):
        out.append(f"buffers: {sorted(map(describe_key, ours.layouts))} from the layout, "
                   f"{sorted(map(describe_key, theirs.layouts))} from Megatron-LM")
    for key in set(ours.layouts) & set(theirs.layouts):
        a, b = ours.layouts[key], theirs.layouts[key]
        for field in ("bucket_indices", "per_bucket_numel_unpadded", "param_indices",
                      "num_optimizer_shards"):
            x, y = getattr(a, field), getattr(b, field)
            if isinstance(x, list):
                x, y = [tuple(v) if isinstance(v, (list, tuple)) else v for v in x], \
                       [tuple(v) if isinstance(v, (list, tuple)) else v for v in y]
            if x != y:
                x, y = (short(x), short(y)) if isinstance(x, list) else (x, y)
                out.append(f"{describe_key(key)}: {field}: {x} from the layout, {y} from "
                           f"Megatron-LM")
        wrong = [names[p] for p in set(a.param_index_map) | set(b.param_index_map)
                 if tuple(a.param_index_map.get(p, ())) != tuple(b.param_index_map.get(p, ()))]
        if wrong:
            out.append(f"{describe_key(key)}: {len(wrong)} params placed differently, e.g. "
                       f"{sorted(wrong)[0]}")
    return out


def compare_with_megatron(args, torch, mcore, loader):
    """Plans the variants and compares the loader's layouts with Megatron-LM's (CPU only)."""
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    manifest = work / "megatron-ddp.json"
    write_manifest(build_model(torch, seed=1), manifest)
    results = {}
    for name, strategy, packer, optimizer in VARIANTS:
        layout_path = work / f"megatron-ddp-{name}.layout.json"
        layout = plan(args, manifest, layout_path, strategy, packer)
        model = build_model(torch, seed=1)
        if strategy == "layerwise":
            with phase("tag_params_for_buffer_routing"):
                mcore["tag"]([model])
        ours, refused = load(loader, layout_path, model, strategy)
        differences = [refused] if refused else None
        if optimizer and not refused:
            with phase(f"Megatron-LM's {optimizer}.compute_full_param_layout"):
                ddp_config = mcore["DDPConfig"](grad_reduce_in_fp32=True,
                                                use_distributed_optimizer=True,
                                                overlap_grad_reduce=True, bucket_size=BUCKET)
                params = [p for p in model.parameters() if p.requires_grad]
                theirs = mcore[optimizer].compute_full_param_layout(
                    params, BUCKET, DP, ddp_config, expert_data_parallel_world_size=EXPERT_DP)
            names = {p: n for n, p in model.named_parameters()}
            differences = layout_differences(ours, theirs, names)
            verdict = "equals" if not differences else "DIFFERS from"
            print(f"{name}: {len(ours.layouts)} buffers: the loader's FullParamLayout {verdict} "
                  f"Megatron-LM's {optimizer}.compute_full_param_layout")
            for line in differences:
                print(f"  {line}")
        elif refused:
            print(f"{name}: {refused}")
        else:
            print(f"{name}: {len(ours.layouts)} buffers (its packer has no Megatron-LM equal)")
        results[name] = dict(layout=layout, layout_path=layout_path, differences=differences)
    return results


def load(loader, layout_path, model, strategy):
    """(the loader's FullParamLayout, None), or (None, why it refused the layout)."""
    try:
        with phase(f"the loader's full_param_layout ({layout_path.name})"):
            return loader.full_param_layout(str(layout_path), model,
                                            expect={"dp": DP, "strategy": strategy}), None
    except Unrunnable as e:
        if "LayoutMismatch" not in str(e):
            raise
        return None, f"the loader refused the layout: {e}"


def init_distributed(torch, mcore):
    if not torch.cuda.is_available():
        raise Unrunnable("no CUDA device was found (torch.cuda.is_available() is False)")
    with phase("torch.distributed.init_process_group (nccl, 1 rank)"):
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        torch.cuda.set_device(0)
        torch.distributed.init_process_group("nccl", rank=0, world_size=1)
    with phase("parallel_state.initialize_model_parallel"):
        mcore["parallel_state"].initialize_model_parallel(create_gloo_process_groups=False)


def run_ddp(torch, mcore, loader, name, strategy, entry):
    """Megatron-LM's DDP with the layout, one backward pass; problems as lines."""
    problems = []
    model = build_model(torch, seed=1, device="cuda")
    reference = build_model(torch, seed=1, device="cuda")
    if strategy == "layerwise":
        mcore["tag"]([model])
    full, refused = load(loader, entry["layout_path"], model, strategy)
    if refused:
        print(f"{name}: {refused}")
        return [refused]
    before = torch.cuda.memory_allocated()
    try:
        with phase(f"DistributedDataParallel with the {name} layout"):
            config = mcore["TransformerConfig"](num_attention_heads=1, num_layers=1)
            ddp_config = mcore["DDPConfig"](grad_reduce_in_fp32=True,
                                            use_distributed_optimizer=True,
                                            overlap_grad_reduce=True, bucket_size=BUCKET)
            ddp = mcore["DDP"](config, ddp_config, model, full_param_layout=full)
    except Unrunnable as e:
        if "AssertionError" not in str(e):
            raise
        print(f"{name}: DistributedDataParallel refused the layout: {e}")
        return [str(e)]
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated() - before
    buffers = list(ddp.buffers) + list(ddp.expert_parallel_buffers)
    param_bytes = sum(b.param_data.numel() * b.param_data.element_size()
                      for b in buffers if b.param_data is not None)
    grad_bytes = sum(b.grad_data.numel() * b.grad_data.element_size() for b in buffers)
    expected = entry["layout"]["stats"]["bytes_per_rank"]
    for what, got, want in (("param", param_bytes, expected["params"]),
                            ("grad", grad_bytes, expected["grads"])):
        if got != want:
            problems.append(f"{what} buffers: {got:,} bytes in DDP, {want:,} in the layout")

    names = {p: n for n, p in model.named_parameters()}
    starts = {p["name"]: (p["start"], p["end"]) for b in entry["layout"]["buffers"]
              for p in b["params"]}
    misplaced = []
    for b in buffers:
        for p, (start, end, _) in b.param_index_map.items():
            if (start, end) != starts.get(names[p]):
                misplaced.append(f"{names[p]} at [{start}, {end}) in DDP")
            elif b.param_data is not None and p.data.data_ptr() != (
                    b.param_data.data_ptr() + start * b.param_data.element_size()):
                misplaced.append(f"{names[p]}: its data is not at its offset in the param buffer")
            elif p.main_grad.data_ptr() != (
                    b.grad_data.data_ptr() + start * b.grad_data.element_size()):
                misplaced.append(f"{names[p]}: its main_grad is not at its offset in the grad "
                                 f"buffer")
    problems += [f"misplaced: {m}" for m in misplaced[:5]]

    with phase(f"a forward and backward pass through DDP ({name})"):
        tokens = torch.randint(0, VOCAB, (4, 64), device="cuda",
                               generator=torch.Generator(device="cuda").manual_seed(7))
        ddp.zero_grad_buffer()
        loss = ddp(tokens)
        loss.backward()
        ddp.finish_grad_sync()
        reference(tokens).backward()
        torch.cuda.synchronize()
    exact = 0
    for (n, p), (_, q) in zip(model.named_parameters(), reference.named_parameters()):
        want = q.grad.float()
        if torch.equal(p.main_grad, want):
            exact += 1
        elif not torch.allclose(p.main_grad, want, rtol=1e-2, atol=1e-4):
            error = (p.main_grad - want).abs().max().item()
            problems.append(f"main_grad of {n} differs from the gradient without DDP "
                            f"(max |difference| {error:.3g})")
    count = len(names)
    print(f"{name}: DDP buffers {len(buffers)}, params {param_bytes:,} B, grads {grad_bytes:,} B "
          f"(layout: {expected['params']:,} B, {expected['grads']:,} B); "
          f"{allocated / 2**20:.1f} MiB allocated by DDP; "
          f"main_grad bit-identical for {exact} of {count} params")
    for line in problems:
        print(f"  {line}")
    del ddp, model, reference
    torch.cuda.empty_cache()
    return problems


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--paramlayout", required=True)
    parser.add_argument("--megatron", required=True, help="the folder holding megatron/core")
    parser.add_argument("--loader", required=True, help="the project's Megatron-LM loader (.py)")
    parser.add_argument("--work", required=True)
    parser.add_argument("--traceback", help="append full tracebacks here")
    parser.add_argument("--preflight", action="store_true",
                        help="only check that everything the step reads is there")
    ARGS = args = parser.parse_args()
    try:
        check_files(args)
        source = Path(args.megatron, "megatron/SOURCE")
        print(f"megatron: {source.read_text().strip() if source.exists() else args.megatron}")
        if args.preflight:
            print("megatron: preflight ok (files present)")
            return 0
        torch, mcore, loader = import_all(args)
        print(f"megatron: torch {torch.__version__}, loader {args.loader}")
        results = compare_with_megatron(args, torch, mcore, loader)
        init_distributed(torch, mcore)
        problems = sum((len(r["differences"] or []) for r in results.values()), 0)
        for name, strategy, _, _ in VARIANTS:
            problems += len(run_ddp(torch, mcore, loader, name, strategy, results[name]))
        torch.distributed.destroy_process_group()
    except Unrunnable as e:
        print(f"megatron: cannot run: {e}")
        return 2
    print(f"megatron: {'all agree' if problems == 0 else f'{problems} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
