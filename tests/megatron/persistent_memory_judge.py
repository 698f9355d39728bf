#!/usr/bin/env python3
"""Megatron-LM's own DDP and optimizer as the judge of `job`'s persistent memory per rank.

    persistent_memory_judge.py BINARY

For each small GPT launch line below, `paramlayout job` plans the job and records, per
pipeline stage, `memory.stages[i].persistent`: param_buffers, grad_buffers, optimizer_state
and model_buffers, bytes per rank (the optimizer's figure for the heaviest data-parallel rank:
job/optimizer_charge.cpp, docs/cli.md "Optimizer state"). Megatron-LM then reads the same line
itself (parse_args, validate_args: megatron_runtime.read_arguments) and, for every pipeline
stage and every data-parallel rank of it, over torch's fake process group at that global rank
(megatron_runtime.initialize_parallel), builds the stage's chunks with training.get_model
(Float16Module, its DistributedDataParallel) and the optimizer with training's own
get_megatron_optimizer_config and get_megatron_optimizer (the launch line's OptimizerConfig:
Adam, bf16 or float32, with or without --use-distributed-optimizer). Adam's state, which
torch makes lazily at the first step, is made with the init_state_fn get_megatron_optimizer
hands the wrapper (optimizer/__init__.py:592-600: exp_avg and exp_avg_sq, zeros_like each
main param), called on the inner torch optimizer as MegatronOptimizer's state_dict and
sharded_state_dict call it before a first step (optimizer.py:1129, 1146, 1394).

Then every tensor is counted, by storage (two views of one storage count once):
- param_buffers: each DDP buffer's param_data (`buffers`, `expert_parallel_buffers`), plus
  every param in no such buffer, its own tensor: without the distributed optimizer DDP makes
  no param_data (param_and_grad_buffer.py:1182-1189) and the weights are the params
  themselves, which paramlayout's figure counts (the output says how many bytes those are);
- grad_buffers: each buffer's grad_data;
- optimizer_state: every storage the optimizer holds that is not the model's (not a model
  param's, not a DDP buffer's): the main params (DistributedOptimizer's
  shard_fp32_from_float16_groups and shard_fp32_groups; Float16OptimizerWithFloat16Params'
  fp32_from_float16_groups and fp32_from_fp32_groups; FP32Optimizer's param groups; float32
  params' entries are views of the model's, so they count nothing) and the inner optimizer's
  state tensors.
- model_buffers: model_buffer_bytes (its docstring), the tensors the model's modules keep
  beside the params after a first forward.
paramlayout's four figures for a stage must equal Megatron-LM's: the buffers at any rank
(the judge checks that they are the same at all), the optimizer state at the heaviest rank;
every rank's optimizer bytes are printed. Each chunk's bytes_per_rank is held to the chunk's
counts the same way (its optimizer bytes at its own heaviest rank). Where a figure differs,
the chunk's own storages at the heaviest rank are listed, largest first.

What is patched, and why:
- megatron_runtime.patch_gpu_queries (its docstring): everything is built on the meta device,
  which gives sizes without memory, so bytes are numel x element size;
- `Tensor.type()` (no arguments) on a meta tensor answers the CUDA type name
  ('torch.cuda.BFloat16Tensor'): Megatron-LM's mixed-precision optimizers sort params into
  16-bit and float32 by that name (distrib_optimizer.py:400, optimizer.py:1008, 1023) and
  refuse any other;
- neither Transformer Engine nor apex is installed, so optimizer/__init__.py:11-33 takes
  torch's AdamW for TE's FusedAdam: the same state (exp_avg, exp_avg_sq of each main param),
  made by the same init_state_fn;
- no gloo groups (use_gloo_process_groups=False): they serve checkpointing only.

Run with any python3: it runs itself again in tools/megatron-env.sh's python; exit 77 (skipped)
with the reason where that environment cannot be made. Exit 0 all agree, 1 a difference.
"""
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from real_model_suite import judge_binary  # noqa: E402

MODEL = ["--hidden-size", "64", "--num-attention-heads", "4", "--ffn-hidden-size", "96",
         "--max-position-embeddings", "128", "--seq-length", "128", "--vocab-size", "1000",
         "--micro-batch-size", "1", "--lr", "1e-4"]
DISTRIBUTED = ["--bf16", "--use-distributed-optimizer"]
CASES = [  # (name, world size, line)
    ("tp 1 dp 1", 1, MODEL + ["--num-layers", "2"] + DISTRIBUTED),
    ("dp 2", 2, MODEL + ["--num-layers", "2"] + DISTRIBUTED),
    ("dp 4", 4, MODEL + ["--num-layers", "3"] + DISTRIBUTED),
    ("dp 4 untied, buckets", 4, MODEL + ["--num-layers", "2", "--untie-embeddings-and-output-"
                                         "weights", "--ddp-bucket-size", "20000"] + DISTRIBUTED),
    ("pp 2", 2, MODEL + ["--num-layers", "4", "--pipeline-model-parallel-size", "2"]
     + DISTRIBUTED),
    ("pp 2 dp 2", 4, MODEL + ["--num-layers", "4", "--pipeline-model-parallel-size", "2"]
     + DISTRIBUTED),
    ("pp 2 vp 2 dp 2", 4, MODEL + ["--num-layers", "4", "--pipeline-model-parallel-size", "2",
                                   "--num-layers-per-virtual-pipeline-stage", "1"]
     + DISTRIBUTED),
    ("tp 2 dp 2", 4, MODEL + ["--num-layers", "2", "--tensor-model-parallel-size", "2"]
     + DISTRIBUTED),
    ("dp 2 without the distributed optimizer", 2, MODEL + ["--num-layers", "2", "--bf16"]),
    ("dp 2 overlapped param gather", 2, MODEL + [
        "--num-layers", "2", "--overlap-grad-reduce", "--overlap-param-gather"] + DISTRIBUTED),
    ("dp 2 float32", 2, MODEL + ["--num-layers", "2", "--use-distributed-optimizer"]),
    ("dp 2 float32 without the distributed optimizer", 2, MODEL + ["--num-layers", "2"]),
    ("rope, rotary percent 0.5, pp 2 vp 2", 4, MODEL + [
        "--num-layers", "4", "--position-embedding-type", "rope", "--rotary-percent", "0.5",
        "--no-rope-fusion", "--pipeline-model-parallel-size", "2",
        "--num-layers-per-virtual-pipeline-stage", "1"] + DISTRIBUTED),
    ("yarn", 2, MODEL + ["--num-layers", "2", "--position-embedding-type", "yarn",
                         "--yarn-original-max-position-embeddings", "64"] + DISTRIBUTED),
    ("MoE, expert bias, global aux loss", 2, MODEL + [
        "--num-layers", "2", "--position-embedding-type", "rope", "--no-rope-fusion",
        "--num-experts", "4", "--moe-router-enable-expert-bias",
        "--moe-router-score-function", "sigmoid",
        "--moe-router-load-balancing-type", "global_aux_loss", "--moe-aux-loss-coeff", "0.01"]
     + DISTRIBUTED),
    ("MoE, quantile balancing, float32", 2, MODEL + [
        "--num-layers", "2", "--num-experts", "4",
        "--moe-router-load-balancing-type", "quantile_balancing",
        "--use-distributed-optimizer"]),
    ("MLA, yarn with rope fusion", 2, MODEL + [
        "--num-layers", "2", "--position-embedding-type", "rope", "--multi-latent-attention",
        "--q-lora-rank", "32", "--kv-lora-rank", "16", "--qk-head-dim", "16",
        "--qk-pos-emb-head-dim", "8", "--v-head-dim", "16"] + DISTRIBUTED),
    ("MLA, rope", 2, MODEL + [
        "--num-layers", "2", "--position-embedding-type", "rope", "--multi-latent-attention",
        "--rope-type", "rope", "--no-rope-fusion", "--kv-lora-rank", "16", "--qk-head-dim",
        "16", "--qk-pos-emb-head-dim", "8", "--v-head-dim", "16"] + DISTRIBUTED),
]


CONFIGS = HERE.parent.parent / "testdata" / "configs"
HF_LINE = ["--micro-batch-size", "1", "--lr", "1e-4", "--seq-length", "4096"] + DISTRIBUTED
# (name, world size, line, Hugging Face config): Megatron-Bridge's providers build the model;
# the config's rope fields (partial_rotary_factor, rope_scaling) size its rotary tables.
HF_CASES = [
    ("Nemotron-4-15B, partial rotary 0.5, pp 4", 4,
     HF_LINE + ["--pipeline-model-parallel-size", "4"], CONFIGS / "nemotron-4-15b.json"),
    ("Qwen3-Next-80B-A3B, partial rotary 0.25, gated delta nets, pp 2 ep 2", 4,
     HF_LINE + ["--pipeline-model-parallel-size", "2", "--expert-model-parallel-size", "2"],
     CONFIGS / "qwen3-next-80b-a3b.json"),
    ("DeepSeek-V3, MLA yarn, MTP, pp 8", 8, HF_LINE + [
        "--pipeline-model-parallel-size", "8", "--decoder-first-pipeline-num-layers", "5",
        "--decoder-last-pipeline-num-layers", "8", "--mtp-num-layers", "1"],
     CONFIGS / "deepseek-v3.json"),
]


def paramlayout_stages(binary, world, line, hf_config=None):
    """job.json's persistent terms per stage, and each chunk's bytes_per_rank."""
    out = Path(tempfile.mkdtemp(prefix="persistent-memory-judge-")) / "job"
    config = ["--hf-config", str(hf_config)] if hf_config else []
    subprocess.run([binary, "job", "--world-size", str(world), "-q", "-o", str(out)] + config
                   + ["--"] + line, check=True)
    record = json.loads((out / "job.json").read_text())
    stages = [s["persistent"] for s in record["memory"]["stages"]]
    chunks = {(c["stage"], c["chunk"]): c["bytes_per_rank"] for c in record["chunks"]}
    return stages, chunks


def patch_tensor_type():
    """Tensor.type() on a meta tensor answers the CUDA type name (see the docstring)."""
    import torch
    original = torch.Tensor.type
    if getattr(original, "_persistent_judge", False):
        return

    def type_(self, *args, **kwargs):
        if not args and not kwargs and self.device.type == "meta":
            return original(self).replace("torch.meta.", "torch.cuda.")
        return original(self, *args, **kwargs)

    type_._persistent_judge = True
    torch.Tensor.type = type_


def storage(t):
    return t.untyped_storage()._cdata


def leaves(optimizer):
    """The Megatron-LM optimizers inside OPTIMIZER (ChainedOptimizer holds several)."""
    if hasattr(optimizer, "chained_optimizers"):
        return [o for inner in optimizer.chained_optimizers for o in leaves(inner)]
    return [optimizer]


MAX_SHOWN = 24  # the largest own storages shown for a chunk that differs
MAIN_GROUPS = ("shard_fp32_from_float16_groups", "shard_fp32_groups",
               "fp32_from_float16_groups", "fp32_from_fp32_groups")


def count_rank(chunks, optimizer):
    """Bytes of the chunks' DDP buffers and of the optimizer's own storages, per chunk:
    [{params, grads, main, state, tensors}] (tensors: (what, name, bytes) of each own
    storage, to tell which one makes a difference)."""
    import torch
    model = set()
    per_chunk = []
    owner = {}  # a model param's id -> its chunk
    names = {}
    for c, ddp in enumerate(chunks):
        params = grads = 0
        seen = set()
        for buf in list(ddp.buffers) + list(getattr(ddp, "expert_parallel_buffers", [])):
            for attr in ("param_data", "grad_data"):
                t = getattr(buf, attr, None)
                if t is None or storage(t) in seen:
                    continue
                seen.add(storage(t))
                if attr == "param_data":
                    params += t.untyped_storage().nbytes()
                else:
                    grads += t.untyped_storage().nbytes()
        model |= seen
        own = 0  # params in no DDP param buffer: each its own tensor
        for name, p in ddp.module.named_parameters():
            if storage(p) not in model:
                model.add(storage(p))
                own += p.untyped_storage().nbytes()
            owner[id(p)] = c
            names[id(p)] = name
        per_chunk.append({"params": params + own, "own": own, "grads": grads, "main": 0,
                          "state": 0, "tensors": []})

    counted = set()

    def charge(t, c, what, name):
        if not isinstance(t, torch.Tensor) or storage(t) in model or storage(t) in counted:
            return
        counted.add(storage(t))
        size = t.untyped_storage().nbytes()
        per_chunk[c]["main" if what == "main param" else "state"] += size
        per_chunk[c]["tensors"].append((what, name, size))

    for opt in leaves(optimizer):
        inner = opt.optimizer
        # The main param standing for each of the inner optimizer's params, and its model
        # param (the chunk it belongs to): the wrappers keep the two lists in step.
        model_of = {}
        if hasattr(opt, "model_float16_groups"):  # DistributedOptimizer
            pairs = [(opt.model_float16_groups, opt.shard_fp32_from_float16_groups),
                     (opt.model_fp32_groups, opt.shard_fp32_groups)]
        elif hasattr(opt, "float16_groups"):  # Float16OptimizerWithFloat16Params
            pairs = [(opt.float16_groups, opt.fp32_from_float16_groups)]
        else:  # FP32Optimizer: the model's params themselves
            pairs = [([g["params"] for g in inner.param_groups],
                      [g["params"] for g in inner.param_groups])]
        for models, mains in pairs:
            for mg, sg in zip(models, mains):
                for m, s in zip(mg, sg):
                    if s is not None:
                        model_of[id(s)] = m
        for attr in MAIN_GROUPS:
            for group in getattr(opt, attr, None) or []:
                for s in group:
                    if s is not None:
                        m = model_of.get(id(s), s)
                        charge(s, owner[id(m)], "main param", names[id(m)])
        for group in inner.param_groups:
            for s in group["params"]:
                m = model_of.get(id(s), s)
                for key, value in inner.state.get(s, {}).items():
                    charge(value, owner[id(m)], key, names[id(m)])
    return per_chunk


def model_buffer_bytes(chunks, args):
    """The chunks' model_buffers as they stand after a forward: every registered buffer, each
    rotary embedding's inv_freq (and yarn's inv_freq_extra, inv_freq_inter), and the tables
    each class's lru-cached forward keeps. The calls a first forward makes are made here, with
    the arguments the forward passes: TopKRouter._maintain_float32_expert_bias (router.py:855);
    the model's rotary embedding as gpt_model.py:412-419 calls it; each attention layer's as
    multi_latent_attention.py:704-720 (get_cached_cos_sin for fused yarn) and dsa.py:1261-1264
    call theirs."""
    import torch
    from megatron.core.models.common.embeddings.rotary_pos_embedding import RotaryEmbedding
    from megatron.core.models.common.embeddings.yarn_rotary_pos_embedding import (
        YarnRotaryEmbedding)
    from megatron.core.transformer.moe.router import TopKRouter
    dtype = torch.bfloat16 if args.bf16 else torch.float16 if args.fp16 else torch.float32
    seq = args.seq_length
    tables = {RotaryEmbedding: [], YarnRotaryEmbedding: []}
    seen, total = set(), 0
    for cls in tables:
        cls.forward.cache_clear()  # a previous build's tables

    def count(t):
        nonlocal total
        if isinstance(t, torch.Tensor) and storage(t) not in seen:
            seen.add(storage(t))
            total += t.untyped_storage().nbytes()

    for ddp in chunks:
        model = ddp.module.module if hasattr(ddp.module, "module") else ddp.module
        for name, m in model.named_modules():
            if isinstance(m, TopKRouter):
                m._maintain_float32_expert_bias()
            if not isinstance(m, RotaryEmbedding):
                continue
            cls = YarnRotaryEmbedding if isinstance(m, YarnRotaryEmbedding) else RotaryEmbedding
            if name == "rotary_pos_emb":  # the model's own
                out = m(seq, packed_seq=False, cp_group=None)
            elif cls is YarnRotaryEmbedding and args.apply_rope_fusion and \
                    name.endswith("self_attention.rotary_pos_emb"):
                misses = cls.forward.cache_info().misses
                m.get_cached_cos_sin(seq, dtype=dtype, packed_seq=False)
                # The table _set_cos_sin_cache's forward cached, if it ran: the same call hits.
                out = (m.forward(seq, 0, packed_seq=False, cp_group=None)
                       if cls.forward.cache_info().misses > misses else None)
            else:
                out = m(seq, packed_seq=False)
            if out is not None:
                tables[cls].append(out[0] if isinstance(out, tuple) else out)
            for attr in ("inv_freq", "inv_freq_extra", "inv_freq_inter"):
                count(getattr(m, attr, None))
        for _, b in model.named_buffers():
            count(b)
    for cls, kept in tables.items():
        for t in kept[len(kept) - cls.forward.cache_info().currsize:] if kept else []:
            count(t)
    return total


def build_rank(args, stage, dp_rank):
    """The stage's chunks and optimizer at its DP_RANK-th data-parallel rank."""
    import torch
    from megatron.core import parallel_state as mpu
    from megatron.core.enums import ModelType
    from megatron.core.optimizer import get_megatron_optimizer
    from megatron.training import training

    import megatron_runtime as runtime
    step = args.tensor_model_parallel_size * args.context_parallel_size
    rank = runtime.stage_rank(args, stage) + dp_rank * step  # order tp-cp-ep-dp-pp
    assert runtime.initialize_parallel(args, rank) == stage
    assert mpu.get_data_parallel_rank() == dp_rank, (rank, mpu.get_data_parallel_rank())
    with torch.device("meta"), runtime.cuda_to_meta():
        chunks = training.get_model(runtime.model_provider_for(args),
                                    ModelType.encoder_or_decoder, wrap_with_ddp=True)
        config, overrides = training.get_megatron_optimizer_config(args)
        optimizer = get_megatron_optimizer(config, chunks, config_overrides=overrides,
                                           use_gloo_process_groups=False)
        for opt in leaves(optimizer):
            if opt.init_state_fn is not None:  # as MegatronOptimizer calls it
                opt.init_state_fn(opt.optimizer, opt.config)
        buffers = model_buffer_bytes(chunks, args)
    return chunks, optimizer, buffers


def megatron_stages(line, world, hf_config=None):
    """Per stage, per data-parallel rank, per chunk: count_rank's figures."""
    import megatron_runtime as runtime
    runtime.use_bridge(None)
    if hf_config:
        import bridge_model
        provider = bridge_model.bridge_provider(str(hf_config))
        args = runtime.read_arguments(runtime.megatron_line(line), world,
                                      bridge_model.model_arguments(provider))
        runtime.use_bridge(bridge_model.bridge_model_provider(args, provider, line))
    else:
        args = runtime.read_arguments(runtime.megatron_line(line), world)
    assert not args.use_tp_pp_dp_mapping
    dp = args.data_parallel_size
    stages = []
    for stage in range(args.pipeline_model_parallel_size):
        ranks = []
        for r in range(dp):
            chunks, optimizer, buffers = build_rank(args, stage, r)
            counts = count_rank(chunks, optimizer)
            for c, chunk in enumerate(counts):
                chunk["buffers"] = buffers if c == 0 else 0
            ranks.append(counts)
        stages.append(ranks)
    return stages


def judge_case(binary, name, world, line, hf_config=None):
    """The lines to print and whether all agree."""
    ours, our_chunks = paramlayout_stages(binary, world, line, hf_config)
    with contextlib.redirect_stdout(sys.stderr):
        theirs = megatron_stages(line, world, hf_config)
    shown = line if hf_config else line[len(MODEL):]
    lines, ok = [f"{name} (world {world}): {' '.join(shown)}"], True
    if len(ours) != len(theirs):
        return lines + [f"  stages: paramlayout {len(ours)}, Megatron-LM {len(theirs)}"], False
    for s, (mine, ranks) in enumerate(zip(ours, theirs)):
        totals = [{k: sum(c[k] for c in chunks) for k in ("params", "own", "grads", "main",
                                                          "state", "buffers")}
                  for chunks in ranks]
        optimizer = [t["main"] + t["state"] for t in totals]
        heaviest = max(range(len(ranks)), key=lambda r: optimizer[r])
        same_buffers = len({(t["params"], t["grads"], t["buffers"]) for t in totals}) == 1
        megatron = {"param_buffers": totals[0]["params"], "grad_buffers": totals[0]["grads"],
                    "optimizer_state": optimizer[heaviest],
                    "model_buffers": totals[0]["buffers"]}
        chunks_agree = all(chunk_figures(ranks, c) == our_chunks.get((s, c))
                           for c in range(len(ranks[0])))
        agree = same_buffers and chunks_agree and all(mine[k] == megatron[k] for k in megatron)
        ok &= agree
        lines.append(
            f"  stage {s}: paramlayout params {mine['param_buffers']} grads "
            f"{mine['grad_buffers']} optimizer {mine['optimizer_state']}; Megatron-LM params "
            f"{megatron['param_buffers']} grads {megatron['grad_buffers']} optimizer "
            f"{megatron['optimizer_state']} (dp rank {heaviest}; main params "
            f"{totals[heaviest]['main']} + state {totals[heaviest]['state']}); model buffers "
            f"paramlayout {mine.get('model_buffers')}, Megatron-LM {megatron['model_buffers']}: "
            f"{'agree' if agree else 'DIFFER'}")
        if totals[0]["own"]:
            lines.append(f"    of Megatron-LM's params, {totals[0]['own']} B are params in no "
                         f"DDP param buffer (their own tensors)")
        if len(ranks) > 1:
            lines.append(f"    optimizer bytes per dp rank: {optimizer}")
        if not same_buffers:
            lines.append(f"    DDP buffers differ between dp ranks: "
                         f"{[(t['params'], t['grads']) for t in totals]}")
        if not agree:
            lines += explain(s, mine, ranks, heaviest, our_chunks)
    return lines, ok


def chunk_figures(ranks, c):
    """Chunk C's bytes_per_rank as Megatron-LM's counts give them (its heaviest rank's
    optimizer bytes)."""
    return {"params": ranks[0][c]["params"], "grads": ranks[0][c]["grads"],
            "optimizer": max(rank[c]["main"] + rank[c]["state"] for rank in ranks)}


def explain(s, mine, ranks, heaviest, our_chunks):
    """Where a stage's figures differ: chunk by chunk, then the heaviest rank's own tensors."""
    out = []
    for c, theirs in enumerate(ranks[heaviest]):
        ours = our_chunks.get((s, c), {})
        out.append(f"    chunk {c}: paramlayout {ours}; Megatron-LM params {theirs['params']} "
                   f"grads {theirs['grads']} optimizer {theirs['main'] + theirs['state']}")
        per_rank = [rank[c]["main"] + rank[c]["state"] for rank in ranks]
        out.append(f"      chunk {c} optimizer bytes per dp rank: {per_rank}")
        for what, name, size in sorted(theirs["tensors"], key=lambda t: -t[2])[:MAX_SHOWN]:
            out.append(f"      {what} {name}: {size} B")
    return out


def main():
    binary = judge_binary(__doc__, __file__)
    if isinstance(binary, int):
        return binary
    import megatron_runtime as runtime
    runtime.put_upstream_on_path()
    runtime.patch_gpu_queries()
    patch_tensor_type()
    agreed = 0
    cases = [case + (None,) for case in CASES] + HF_CASES
    for name, world, line, hf_config in cases:
        try:
            lines, ok = judge_case(binary, name, world, line, hf_config)
        except Exception as e:  # the judge failing on a case is a failure of the case
            if os.environ.get("REAL_MODEL_DEBUG"):
                import traceback
                traceback.print_exc()
            lines, ok = [f"{name} (world {world}): judge error: {type(e).__name__}: {e}"], False
        agreed += ok
        print("\n".join(lines), flush=True)
    print(f"persistent-memory judge: {agreed}/{len(cases)} agree")
    return 0 if agreed == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
