#!/usr/bin/env python3
"""Writes the benchmarks' manifests (bench/, tools/gpu-check.sh; stdlib only):

  deepseek-v3-ep1.json  DeepSeek-V3 (61 layers, MLA, 256 routed experts + 1 shared, first 3
                        layers dense) as Megatron-LM names it (TE layer spec, grouped-GEMM
                        experts), all experts on one rank: ~30.6k params, ~0.67 T elements.
  synthetic-1m.json     1,000,000 params of mixed shapes, dtypes and attributes.
  llama3-70b-tp8-pp4-stage0.json, deepseek-v3-ep64-pp16-stage1.json
                        one rank's chunk of a pipeline stage (2.27 G and 1.64 G elements).
  llama3.2-1b.json      Llama-3.2-1B whole (tied embeddings): 1.24 G elements.

Usage: gen_manifests.py OUT_DIR [NAME...]   (NAME: a file above without .json; default all)
"""
import json
import random
import sys
from pathlib import Path


def deepseek_v3(name="deepseek-v3-ep1", layers=range(61), experts_here=256, first=True,
                last=True):
    """DeepSeek-V3 as one rank's chunk: `layers` of the 61, `experts_here` of the 256 routed
    experts of each MoE layer, the embedding on the first stage, the output on the last."""
    hidden, vocab, dense_layers = 7168, 129280, 3
    heads, q_lora, kv_lora, nope, rope, v_dim = 128, 1536, 512, 128, 64, 128
    ffn, moe_ffn, experts = 18432, 2048, 256
    params = []
    if first:
        params.append(("embedding.word_embeddings.weight", [vocab, hidden],
                       {"embedding_or_output": True}))
    for i in layers:
        a = f"decoder.layers.{i}.self_attention"
        params += [
            (f"{a}.linear_q_down_proj.weight", [q_lora, hidden], {}),
            (f"{a}.linear_q_up_proj.layer_norm_weight", [q_lora], {}),
            (f"{a}.linear_q_up_proj.weight", [heads * (nope + rope), q_lora], {}),
            (f"{a}.linear_kv_down_proj.weight", [kv_lora + rope, hidden], {}),
            (f"{a}.linear_kv_up_proj.layer_norm_weight", [kv_lora], {}),
            (f"{a}.linear_kv_up_proj.weight", [heads * (nope + v_dim), kv_lora], {}),
            (f"{a}.linear_proj.weight", [hidden, heads * v_dim], {}),
            (f"decoder.layers.{i}.input_layernorm.weight", [hidden], {}),
        ]
        m = f"decoder.layers.{i}.mlp"
        if i < dense_layers:
            params += [
                (f"{m}.linear_fc1.layer_norm_weight", [hidden], {}),
                (f"{m}.linear_fc1.weight", [2 * ffn, hidden], {}),
                (f"{m}.linear_fc2.weight", [hidden, ffn], {}),
            ]
            continue
        params += [
            (f"decoder.layers.{i}.pre_mlp_layernorm.weight", [hidden], {}),
            (f"{m}.router.weight", [experts, hidden], {}),
            (f"{m}.shared_experts.linear_fc1.weight", [2 * moe_ffn, hidden], {}),
            (f"{m}.shared_experts.linear_fc2.weight", [hidden, moe_ffn], {}),
        ]
        for e in range(experts_here):
            params.append((f"{m}.experts.linear_fc1.weight{e}", [2 * moe_ffn, hidden],
                           {"expert_parallel": True}))
        for e in range(experts_here):
            params.append((f"{m}.experts.linear_fc2.weight{e}", [hidden, moe_ffn],
                           {"expert_parallel": True}))
    if last:
        params += [
            ("decoder.final_layernorm.weight", [hidden], {}),
            ("output_layer.weight", [vocab, hidden], {"embedding_or_output": True}),
        ]
    return {
        "schema": "paramlayout.manifest/v1",
        "model": name,
        "params": [{"name": n, "shape": s, "dtype": "bfloat16", **a} for n, s, a in params],
    }


def llama(model, hidden, ffn, layers, vocab, heads, kv_heads, head_dim, tp=1, pp=1, stage=0,
          tied=False):
    """A Llama as one rank's chunk under tensor parallel `tp`, pipeline stage `stage` of `pp`;
    `tied`: the output layer is the word embedding (no param of its own)."""
    per_stage = layers // pp
    params = []
    if stage == 0:
        params.append(("embedding.word_embeddings.weight", [vocab // tp, hidden],
                       {"embedding_or_output": True}))
    for i in range(stage * per_stage, (stage + 1) * per_stage):
        d = f"decoder.layers.{i}"
        params += [
            (f"{d}.self_attention.linear_qkv.layer_norm_weight", [hidden], {}),
            (f"{d}.self_attention.linear_qkv.weight",
             [(heads + 2 * kv_heads) * head_dim // tp, hidden], {}),
            (f"{d}.self_attention.linear_proj.weight", [hidden, heads * head_dim // tp], {}),
            (f"{d}.mlp.linear_fc1.layer_norm_weight", [hidden], {}),
            (f"{d}.mlp.linear_fc1.weight", [2 * ffn // tp, hidden], {}),
            (f"{d}.mlp.linear_fc2.weight", [hidden, ffn // tp], {}),
        ]
    if stage == pp - 1:
        params.append(("decoder.final_layernorm.weight", [hidden], {}))
        if not tied:
            params.append(("output_layer.weight", [vocab // tp, hidden],
                           {"embedding_or_output": True}))
    return {
        "schema": "paramlayout.manifest/v1",
        "model": model,
        "params": [{"name": n, "shape": s, "dtype": "bfloat16", **a} for n, s, a in params],
    }


def synthetic(count, seed=1):
    rng = random.Random(seed)
    params = []
    for i in range(count):
        r = rng.random()
        if r < 0.5:
            shape = [rng.choice([256, 512, 1024, 2048, 4096]), rng.randint(1, 4096)]
        elif r < 0.9:
            shape = [rng.randint(1, 8192)]
        else:
            shape = [rng.randint(1, 64), rng.randint(1, 64), rng.randint(1, 8)]
        p = {"name": f"model.layers.{i // 16}.block.param_{i % 16}.weight", "shape": shape,
             "dtype": rng.choice(["bfloat16", "bfloat16", "float32"])}
        if i % 5 == 0:
            p["expert_parallel"] = True
        if i % 97 == 0:
            p["use_muon"] = False
        params.append(p)
    return {"schema": "paramlayout.manifest/v1", "model": "synthetic-1m", "params": params}


MANIFESTS = {
    "deepseek-v3-ep1": deepseek_v3,
    "synthetic-1m": lambda: synthetic(1_000_000),
    # One rank's chunk of a pipeline stage, for verify on GPUs (tools/gpu-check.sh).
    "llama3-70b-tp8-pp4-stage0": lambda: llama("llama3-70b-tp8-pp4-stage0", 8192, 28672, 80,
                                               128256, 64, 8, 128, tp=8, pp=4),
    "deepseek-v3-ep64-pp16-stage1": lambda: deepseek_v3(
        "deepseek-v3-ep64-pp16-stage1", layers=range(4, 8), experts_here=4, first=False,
        last=False),
    # The cpu backend's benchmark (bench/verify.sh): 1.24 G elements.
    "llama3.2-1b": lambda: llama("llama3.2-1b", 2048, 8192, 16, 128256, 32, 8, 64, tied=True),
}


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[2:] or MANIFESTS:
        (out / f"{name}.json").write_text(json.dumps(MANIFESTS[name]()))


if __name__ == "__main__":
    main()
