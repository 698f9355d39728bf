"""A torch module -> paramlayout manifest v1 (docs/formats.md).

From Python:

    from paramlayout.from_torch import manifest_from_module
    manifest = manifest_from_module(model_chunk, "llama3-8b-stage0")  # a dict; json.dump it

From the shell:

    python3 -m paramlayout.from_torch package.module:factory -o manifest.json [--model NAME]

where `factory` is called with no arguments and returns an `nn.Module` (a Megatron-LM model
builder, say). Only trainable params (`requires_grad`) are listed, in `named_parameters()`
order, with Megatron-LM's param attributes mapped to manifest fields (`param_entry`).
"""
import argparse
import importlib
import json
import os
import sys

import torch

DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}

# Transformer Engine's quantized tensor classes (matched by name, so that TE need not be
# importable) -> manifest `storage`.
QUANTIZED = {"Float8Tensor": "fp8", "MXFP8Tensor": "mxfp8", "NVFP4Tensor": "nvfp4"}


def _storage(param):
    for cls in type(param).__mro__:
        for name, storage in QUANTIZED.items():
            if cls.__name__ in (name, name + "Base"):
                return storage
    return "dense"


def param_entry(name, param):
    """The manifest entry of one param."""
    if param.dtype not in DTYPES:
        raise ValueError(f"{name}: dtype {param.dtype} is not one of {sorted(DTYPES.values())}")
    entry = {"name": name, "shape": list(param.shape), "dtype": DTYPES[param.dtype]}
    storage = _storage(param)
    if storage != "dense":
        entry["storage"] = storage
    if getattr(param, "allreduce", True) is False:
        entry["expert_parallel"] = True
    if getattr(param, "shared_embedding", False):
        entry["shared_embedding"] = True
    if getattr(param, "is_embedding_or_output_parameter", False):
        entry["embedding_or_output"] = True
    if getattr(param, "use_muon", True) is False:
        entry["use_muon"] = False
    if getattr(param, "is_gtp_weight_remat", False):
        size = int(getattr(param, "gtp_remat_size", 1))
        if size > 1:
            entry["gtp_remat_size"] = size
    return entry


def manifest_from_module(module, model=None):
    """The manifest v1 dict of `module`'s trainable params."""
    manifest = {"schema": "paramlayout.manifest/v1"}
    if model is not None:
        manifest["model"] = model
    manifest["params"] = [param_entry(name, p) for name, p in module.named_parameters()
                          if p.requires_grad]
    if not manifest["params"]:
        raise ValueError("the module has no trainable params")
    return manifest


def _load_factory(spec):
    module_name, sep, function = spec.partition(":")
    if not sep or not module_name or not function:
        raise ValueError(f"expected package.module:function, got {spec!r}")
    sys.path.insert(0, os.getcwd())
    factory = getattr(importlib.import_module(module_name), function)
    module = factory()
    if not isinstance(module, torch.nn.Module):
        raise ValueError(f"{spec}() returned {type(module).__name__}, not a torch.nn.Module")
    return module


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m paramlayout.from_torch",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("factory", help="package.module:function returning an nn.Module")
    parser.add_argument("-o", "--output", help="manifest file (default: stdout)")
    parser.add_argument("--model", help="the manifest's model name (default: the function's)")
    args = parser.parse_args(argv)
    try:
        module = _load_factory(args.factory)
        manifest = manifest_from_module(module, args.model or args.factory.split(":")[-1])
    except (ImportError, AttributeError, ValueError) as e:
        print(f"paramlayout.from_torch: error: {e}", file=sys.stderr)
        return 2
    text = json.dumps(manifest, indent=1) + "\n"
    if not args.output or args.output == "-":
        sys.stdout.write(text)
    else:
        tmp = args.output + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, args.output)
    print(f"{len(manifest['params'])} trainable params", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
