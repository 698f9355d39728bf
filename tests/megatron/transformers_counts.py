#!/usr/bin/env python3
"""transformers' own model for every config in testdata/configs, built on the meta device,
against `paramlayout synth` of the same config (tp 1, pp 1, no vocab padding): the params'
elements, in total and by kind (embedding, output, attention, MLP and experts, norms, other),
every difference named by kind.

    transformers_counts.py BINARY

Run with any python3 (it runs itself again in tools/megatron-env.sh's environment; exit 77
where that cannot be made). A config transformers cannot build (an architecture it does not
ship) is listed as such. Exit 1 if synth fails on a config transformers builds; the
differences themselves are reported, not failed: they are where Megatron-LM's model differs
from the checkpoint's (multi-token prediction layers, which transformers does not build,
for one), and each is named.
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIGS = HERE.parent.parent / "testdata" / "configs"
KINDS = ("embedding", "output", "attention", "mlp", "norm", "other")


def kind(name):
    """The kind of a param, from its name in either model."""
    n = name.lower()
    leaf = n.split(".")[-2] if "." in n else n
    if "norm" in n or leaf.startswith("ln_"):
        return "norm"
    if "embed" in n or leaf in ("wte", "wpe"):
        return "embedding"
    if "lm_head" in n or "output_layer" in n:
        return "output"
    if "attn" in n or "attention" in n:
        return "attention"
    if "mlp" in n or "expert" in n or "moe" in n or "feed_forward" in n:
        return "mlp"
    return "other"


def by_kind(named_sizes):
    out = dict.fromkeys(KINDS, 0)
    for name, size in named_sizes:
        out[kind(name)] += size
    return out


def hf_counts(config_path):
    import torch
    from transformers import AutoModelForCausalLM, CONFIG_MAPPING

    data = json.loads(config_path.read_text())
    config = CONFIG_MAPPING[data["model_type"]].from_dict(data)
    with torch.device("meta"):
        try:
            model = AutoModelForCausalLM.from_config(config)
        except ValueError:
            # A multimodal class with no causal-LM form (Mistral3): its language model alone,
            # from text_config, as synth reads it.
            if "text_config" not in data:
                raise
            model = None
        if model is not None and "text_config" in data and \
                hasattr(model.base_model, "vision_tower"):
            model = None  # a multimodal class's causal-LM form (Gemma 4's) holds its towers
        if model is None:
            text = data["text_config"]
            model = AutoModelForCausalLM.from_config(
                CONFIG_MAPPING[text["model_type"]].from_dict(text))
    seen, sizes = set(), []
    for name, p in model.named_parameters():  # a tied weight is listed once
        if id(p) not in seen:
            seen.add(id(p))
            sizes.append((name, p.numel()))
    return by_kind(sizes)


def synth_counts(binary, config_path):
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "m.json"
        result = subprocess.run([binary, "synth", str(config_path), "--vocab-divisible-by", "1",
                                 "-q", "-o", str(out)], capture_output=True, text=True)
        if result.returncode != 0:
            return None, result.stderr.strip()
        params = json.loads(out.read_text())["params"]
    sizes = []
    for p in params:
        n = 1
        for d in p["shape"]:
            n *= d
        sizes.append((p["name"], n))
    return by_kind(sizes), None


def main():
    sys.path.insert(0, str(HERE))
    import real_model_suite
    if not real_model_suite.in_environment():
        return real_model_suite.reexec_in_environment(__file__)
    binary = sys.argv[1]
    failed = 0
    for config in sorted(CONFIGS.glob("*.json")):
        if config.name == "published.json":
            continue
        try:
            theirs = hf_counts(config)
        except Exception as e:  # an architecture transformers does not build
            print(f"{config.name}: transformers cannot build it ({type(e).__name__}: "
                  f"{str(e).splitlines()[0][:120]})")
            continue
        ours, error = synth_counts(binary, config)
        if ours is None:
            print(f"{config.name}: synth fails: {error}")
            failed += 1
            continue
        total_t, total_o = sum(theirs.values()), sum(ours.values())
        mtp = json.loads(config.read_text()).get("num_nextn_predict_layers") or 0
        why = (f"; the config's {mtp} multi-token prediction layer(s), which synth builds as "
               "Megatron-LM does and transformers does not" if mtp and total_o > total_t else "")
        named = [f"{k} {ours[k] - theirs[k]:+,}" for k in KINDS if ours[k] != theirs[k]]
        print(f"{config.name}: transformers {total_t:,}, synth {total_o:,}"
              + (f", synth - transformers: {total_o - total_t:+,} ({'; '.join(named)})"
                 if named else ", the same by kind") + why)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
