#!/usr/bin/env python3
"""The `hf_model` counts in testdata/configs/published.json, against transformers' own model
built from each shipped config on the meta device (no memory, no weights).

published.json's `hf_model` is what the unit tests tie paramlayout's params to (with every
difference named); this test ties it to the Hugging Face modelling code, independently of
paramlayout: the sum of model.parameters(). A multimodal config's language model alone is
built (its `text_config`), as paramlayout reads it. An entry may name the model type to build
(`hf_model_type`: Kimi-K2's own config names DeepseekV3ForCausalLM). Entries whose source is
not transformers (Megatron-Bridge's own modelling code), or whose model type this
transformers does not know, are listed as skipped, not failed.

Runs itself in the Python environment of tools/megatron-env.sh (torch and transformers);
exits 77 (skipped, with the reason) where that script is absent or cannot make it.
Usage: test_hf_counts.py SOURCE_ROOT
"""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(sys.argv[1]).resolve()
INSIDE = os.environ.get("PARAMLAYOUT_HF_COUNTS_INSIDE") == "1"


def reexec_in_env() -> None:
    script = ROOT / "tools" / "megatron-env.sh"
    if not script.exists():
        print(f"SKIP: {script} is absent: no environment with torch and transformers")
        sys.exit(77)
    made = subprocess.run([str(script)], capture_output=True, text=True)
    lines = made.stdout.strip().splitlines()
    if made.returncode != 0 or not lines:
        print(f"SKIP: {script} could not make its environment: {made.stderr.strip()[-2000:]}")
        sys.exit(77)
    env = dict(os.environ, PARAMLAYOUT_HF_COUNTS_INSIDE="1")
    os.execve(lines[-1], [lines[-1], __file__, str(ROOT)], env)


def count(config: dict, model_type=None):
    """The model's element count, or None when transformers does not know the model type."""
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    text = config.get("text_config")
    source = dict(text) if text is not None else dict(config)
    if text is not None and "tie_word_embeddings" in config:
        source["tie_word_embeddings"] = config["tie_word_embeddings"]
    model_type = model_type or source.get("model_type")
    try:
        hf_config = AutoConfig.for_model(model_type, **{k: v for k, v in source.items()
                                                        if k != "model_type"})
    except (KeyError, ValueError):
        return None
    with torch.device("meta"):
        try:
            model = AutoModelForCausalLM.from_config(hf_config)
        except ValueError:
            return None
    del transformers
    return sum(p.numel() for p in model.parameters())


def main() -> int:
    published = json.loads((ROOT / "testdata/configs/published.json").read_text())
    failures, checked, skipped = [], [], []
    for name, entry in sorted(published.items()):
        if name.startswith("_") or "hf_model" not in entry:
            continue
        if "Megatron-Bridge's own" in entry.get("source", ""):
            skipped.append(f"{name} (counted with Megatron-Bridge's own modelling code)")
            continue
        config = json.loads((ROOT / "testdata/configs" / f"{name}.json").read_text())
        got = count(config, entry.get("hf_model_type"))
        if got is None:
            skipped.append(name)
            continue
        checked.append(name)
        if got != entry["hf_model"]:
            failures.append(f"{name}: transformers builds {got:,} elements, published.json's "
                            f"hf_model says {entry['hf_model']:,}")
    print(f"checked against transformers: {', '.join(checked)}")
    print(f"unknown to this transformers (skipped): {', '.join(skipped) or 'none'}")
    for failure in failures:
        print(f"FAIL: {failure}")
    if not checked:
        print("SKIP: no shipped config's model type is known to this transformers")
        return 77
    return 1 if failures else 0


if __name__ == "__main__":
    if not INSIDE:
        reexec_in_env()
    sys.exit(main())
