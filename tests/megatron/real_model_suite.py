#!/usr/bin/env python3
"""The real-model judge (real_model.py) over many launch lines, in one process.

    real_model_suite.py BINARY --sample              # the fixed sample (CI)
    real_model_suite.py BINARY --random N [--seed S]  # N random lines (the slow suite)
    real_model_suite.py BINARY --search N             # N launches a search lists

Run with any python3: it prepares Megatron-LM's environment with tools/megatron-env.sh and
runs itself again in that environment's python. Exit 77 (skipped) with the reason where the
environment cannot be made here. Each line's outcome is printed; a sample line must give its
expected exit code, a random line anything but 1 (a difference). Last line:
`real-model suite: L/N lines as expected, P/T chunks identical`.
"""
import argparse
import contextlib
import io
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def in_environment():
    """Whether Megatron-LM and torch can be imported here (found, not imported: the judge
    must put its stand-ins in place before Megatron-LM's first import)."""
    import importlib.util
    try:
        return all(importlib.util.find_spec(m) is not None for m in ("torch", "megatron.core"))
    except ImportError:
        return False


def reexec_in_environment(script=__file__):
    """Run SCRIPT again, with the same arguments, in tools/megatron-env.sh's python; 77 with
    the reason where that environment cannot be made."""
    result = subprocess.run([str(ROOT / "tools" / "megatron-env.sh")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["tools/megatron-env.sh failed"])[-1]
        print(f"skipped: Megatron-LM's environment cannot be made here: {reason}")
        return 77
    python = result.stdout.strip().splitlines()[-1]
    os.environ["REAL_MODEL_SUITE_CHILD"] = "1"
    os.execv(python, [python, str(script)] + sys.argv[1:])


def judge_binary(doc, script):
    """The judge's one argument, BINARY, resolved, once SCRIPT runs in tools/megatron-env.sh's
    python with logging below errors off; an int instead is the exit code to return (2: no
    BINARY, DOC printed; 77: the environment cannot be made)."""
    if len(sys.argv) != 2:
        print(doc)
        return 2
    if not os.environ.get("REAL_MODEL_SUITE_CHILD") and not in_environment():
        return reexec_in_environment(script)
    import logging
    logging.disable(logging.WARNING)
    return str(Path(sys.argv[1]).resolve())


def write_planted_binary(binary, *options):
    """An executable that runs planted_paramlayout.py on BINARY with OPTIONS (the judge runs
    one program)."""
    import shlex
    import tempfile
    path = Path(tempfile.mkdtemp(prefix="real-model-planted-")) / "paramlayout"
    words = [sys.executable, str(HERE / "planted_paramlayout.py"), str(Path(binary).resolve())]
    path.write_text(f"#!/bin/sh\nexec {shlex.join(words + list(options))} \"$@\"\n")
    path.chmod(0o755)
    return str(path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--sample", action="store_true")
    parser.add_argument("--random", type=int, default=0)
    parser.add_argument("--configs", default="",
                        help="splits (comma-separated: a tp size, ppN, epN) at which every "
                             "config in testdata/configs is built by Megatron-Bridge")
    parser.add_argument("--known", action="store_true",
                        help="also the lines on which the two are known to differ")
    parser.add_argument("--search", type=int, default=0,
                        help="launches of a search (real_model_cases.SEARCH_LINE), spread "
                             "over its ranked list, each judged")
    parser.add_argument("--seed", default="real-model")
    parser.add_argument("--max-ranks", type=int, default=16,
                        help="dp ranks whose shard ranges are checked per buffer (all up to it)")
    opts = parser.parse_args()
    if not in_environment():
        if os.environ.get("REAL_MODEL_SUITE_CHILD"):
            print("error: the environment tools/megatron-env.sh made does not import Megatron-LM")
            return 1
        return reexec_in_environment()

    sys.path.insert(0, str(HERE))
    import megatron_runtime as runtime
    import tempfile

    import real_model
    import real_model_cases as cases
    import tokenizer_files

    tokenizer_folder = tempfile.TemporaryDirectory(prefix="real-model-tokenizers-")

    chosen = []
    if opts.sample:
        chosen += [(w, line, rc, True, None) for w, line, rc in cases.SAMPLE]
        # Hugging Face configs: tools/demo.sh's jobs (the README's), MTP, a long sequence.
        chosen += [(w, line, rc, True, c) for w, line, rc, c in cases.HF_SAMPLE]
        # The judge must see differences: the first line again, with paramlayout's output
        # tampered with (planted_paramlayout.py), must give exit 1.
        world, line, _ = cases.SAMPLE[0]
        chosen.append((world, line, 1, True, "planted"))
        # ... and a line both refuse, with paramlayout's reason changed to another argument's.
        world, line, _ = cases.REFUSED_CASE
        chosen.append((world, line, 1, True, "planted"))
        # `check --against-log` must name each change to a start-up log (LOG_MUTATIONS).
        world, line, _ = cases.LOG_MUTATION_CASE
        chosen.append((world, line, 0, True, "log-mutations"))
        # Tokenizer files Megatron-LM's build_tokenizer reads; then paramlayout reading another
        # tokenizer than the line's must be caught.
        tokenizers = tokenizer_files.cases(tokenizer_folder.name)
        chosen += [(w, line, rc, True, None) for w, line, rc in tokenizers]
        world, line, _ = tokenizers[0]
        chosen.append((world, line, 1, True, "planted-tokenizer"))
    if opts.known:
        chosen += [(w, line, rc, True, None) for w, line, rc in cases.KNOWN_DIFFERENCES]
    if opts.random:
        chosen += [(w, line, rc, False, None)
                   for w, line, rc in cases.random_cases(opts.random, opts.seed)]
    if opts.search:
        chosen += [(w, line, rc, True, None)
                   for w, line, rc in cases.search_cases(opts.binary, opts.search)]
    if opts.configs:
        splits = tuple(opts.configs.split(","))
        chosen += [(w, line, rc, False, c) for w, line, rc, c in cases.config_cases(splits)]
    as_expected = identical = total = 0
    refusals = uncompared = 0
    started = time.monotonic()
    planted = write_planted_binary(opts.binary)
    planted_tokenizer = write_planted_binary(
        opts.binary, "--read-tokenizer-from", tokenizer_files.other_tokenizer(tokenizer_folder.name))
    for n, (world, line, expected, strict, config) in enumerate(chosen, 1):
        binary = opts.binary
        if config == "planted":
            binary, config = planted, None
        if config == "planted-tokenizer":
            binary, config = planted_tokenizer, None
        log_mutations = config == "log-mutations"
        if log_mutations:
            config = None
        # The fixed lines are built once more at each stage's last rank.
        run_opts = argparse.Namespace(binary=binary, world_size=world, hf_config=config,
                                      max_ranks=opts.max_ranks, log_mutations=log_mutations,
                                      last_rank=strict and binary == opts.binary)
        full = real_model.complete_line(line, config)
        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                rc, lines = real_model.judge_line(run_opts, full, runtime)
        except Exception as e:  # the judge itself failing on a line is a failure of the line
            if os.environ.get("REAL_MODEL_DEBUG"):
                import traceback
                traceback.print_exc()
            rc, lines = 1, [f"judge error: {type(e).__name__}: {e}", "real-model: 0/0 chunks "
                            "identical"]
        if rc == 2:
            refusals += 1
            uncompared += "not compared" in lines[0]
        p, t = (int(x) for x in lines[-1].split()[1].split("/"))
        if binary == opts.binary:  # the planted line's chunks are not counted
            identical, total = identical + p, total + t
        ok = rc == expected if strict else rc != 1
        as_expected += ok
        command = " ".join((["(planted differences)"] if binary != opts.binary else [])
                           + ["--world-size", str(world)]
                           + (["--hf-config", Path(config).name] if config else []) + ["--"]
                           + line)
        print(f"[{n}/{len(chosen)}] {'ok' if ok else 'FAIL'} exit {rc} "
              f"(expected {expected if strict else 'not 1'}), {lines[-1].split(': ')[1]}: "
              f"{command}", flush=True)
        if not ok:
            for text in lines[:-1][:30]:
                print(f"    {text}")
            if rc == 1 and not lines[:-1]:
                print("    " + "\n    ".join(log.getvalue().splitlines()[-15:]))
    print(f"{time.monotonic() - started:.0f} s; {refusals} lines both refuse, "
          f"{refusals - uncompared} of them for the same reason, {uncompared} whose "
          "Megatron-LM reason names no argument")
    print(f"real-model suite: {as_expected}/{len(chosen)} lines as expected, "
          f"{identical}/{total} chunks identical")
    return 0 if as_expected == len(chosen) and chosen else 1


if __name__ == "__main__":
    sys.exit(main())
