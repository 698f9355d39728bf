#!/usr/bin/env python3
"""paramlayout with planted differences, for checking that the real-model judge sees them:
runs the real binary (first argument), then, in the `job -o DIR` output, makes the first
param of the first manifest float32 and moves the first param of the last layout's first
buffer to the next param index; where the binary refuses the line, its reason is replaced by
one about another argument. The judge must report each and exit 1.

    planted_paramlayout.py BINARY ARGS...
    planted_paramlayout.py BINARY --read-tokenizer-from PATH ARGS...

With --read-tokenizer-from, only that is changed: paramlayout reads the tokenizer at PATH in
place of the line's --tokenizer-model (Megatron-LM reads the line's)."""
import glob
import json
import subprocess
import sys


def main():
    binary, args = sys.argv[1], sys.argv[2:]
    if args[:1] == ["--read-tokenizer-from"]:
        path, args = args[1], args[2:]
        args[args.index("--tokenizer-model") + 1] = path
        return subprocess.run([binary] + args).returncode
    result = subprocess.run([binary] + args, stderr=subprocess.PIPE, text=True)
    rc = result.returncode
    if rc != 2:
        sys.stderr.write(result.stderr)
    else:
        print("paramlayout: error: --seq-length (planted) must be a multiple of 7",
              file=sys.stderr)
        return rc
    out = args[args.index("-o") + 1]
    manifest = sorted(glob.glob(f"{out}/stage*.manifest.json"))[0]
    data = json.load(open(manifest))
    data["params"][0]["dtype"] = "float32"
    json.dump(data, open(manifest, "w"))
    layout = sorted(glob.glob(f"{out}/stage*.layout.json"))[-1]
    data = json.load(open(layout))
    data["buffers"][0]["params"][0]["index"] += 1
    json.dump(data, open(layout, "w"))
    return rc


if __name__ == "__main__":
    sys.exit(main())
