#!/usr/bin/env python3
"""Every shipped config as the Hub saves it: transformers' own `to_diff_dict()` (the fields
that differ from the config class's defaults, sub-configs too) must give `paramlayout synth`
the same params as the full file, at tp 1 and at tp 2 over 2 pipeline stages.

Usage: minimal_configs.py BINARY   (runs in tools/megatron-env.sh's environment)
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SPLITS = ([], ["--tp", "2", "--pp", "2", "--stage", "1"])


def minimal_form(path, tmp):
    """The config as transformers saves it, or None when transformers does not know its
    model_type (remote code)."""
    from transformers import CONFIG_MAPPING, AutoConfig
    full = json.loads(path.read_text())
    if full.get("model_type") not in CONFIG_MAPPING:
        return None
    folder = tmp / path.stem
    folder.mkdir()
    (folder / "config.json").write_text(path.read_text())
    config = AutoConfig.from_pretrained(folder)
    config.use_diff = True
    config.save_pretrained(folder / "saved")  # as transformers writes config.json
    return folder / "saved" / "config.json"


def params(binary, config, split):
    r = subprocess.run([binary, "synth", str(config), *split], capture_output=True, text=True)
    if r.returncode != 0:
        return f"exit {r.returncode}: {r.stderr.strip()}"
    return [(p["name"], p["shape"], p["dtype"]) for p in json.loads(r.stdout)["params"]]


def main():
    sys.path.insert(0, str(HERE))
    import real_model_suite as suite
    binary = suite.judge_binary(__doc__, __file__)
    if isinstance(binary, int):
        return binary
    same = checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted((ROOT / "testdata/configs").glob("*.json")):
            full_params = params(binary, path, [])
            if isinstance(full_params, str):
                continue  # a config synth refuses as it stands (docs/cli.md) is not judged
            minimal = minimal_form(path, Path(tmp))
            if minimal is None:
                continue
            for split in SPLITS:
                a = params(binary, path, split)
                if isinstance(a, str):
                    continue  # a split the model does not take (61 layers over 2 stages)
                checked += 1
                b = params(binary, minimal, split)
                if a == b:
                    same += 1
                    continue
                what = b if isinstance(b, str) else f"{len(b)} params, the full form {len(a)}"
                print(f"{path.name} {' '.join(split) or 'tp 1'}: the minimal form differs: {what}")
    print(f"minimal configs: {same}/{checked} as their full form")
    return 0 if same == checked else 1


if __name__ == "__main__":
    sys.exit(main())
