#!/usr/bin/env python3
"""Megatron-LM's own code as the judge of `paramlayout job`, chunk by chunk.

    real_model.py --binary BIN --world-size N [--hf-config C] -- ARGS...

Megatron-LM reads the launch line ARGS itself (parse_args, validate_args), builds every
pipeline stage's virtual chunks with training.get_model (the builders of model_provider.py,
gpt_builders.py, hybrid_builders.py; Float16Module; one DistributedDataParallel per chunk with
its bucketing) on the meta device over torch's fake process group, and the judge compares
each chunk with `paramlayout job`'s manifest and layout for the same line: the trainable
params (order, names, shapes, dtypes, expert-parallel, shared-embedding and the other
attributes DDP reads), DDP's buffers (keys, sizes, buckets, every param's range and index),
the distributed optimizer's shard of every bucket for each data-parallel rank (Muon: the
layer-wise optimizer's assignment of params to shards), and then DDP once more with
`full_param_layout=` from paramlayout's `job_param_layout`: Megatron-LM must accept it and
build the same buffers. With --hf-config the model comes from Megatron-Bridge's bridge for
the config's architecture (its provider, then its own provide()).

Prints each difference (chunk, param, field, Megatron-LM's value, paramlayout's), then
`real-model: P/T chunks identical` last. Exit 0: all identical; 1: any differ (or one side
refuses a line the other accepts); 2: both refuse the line; 3: the line is out of the judge's
reach (the reason is printed). docs/exactness.md says what runs and what is stood in.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "python"))
import refusal_reasons  # noqa: E402

# Arguments Megatron-LM requires to start but that build nothing: added to the line, for both
# sides, only when the line does not give them.
RUN_DEFAULTS = (("--micro-batch-size", "1"),)


def complete_line(args, hf_config=None):
    """ARGS with RUN_DEFAULTS where absent and --seq-length from --max-position-embeddings
    (with a config, Megatron-LM's line gets the model's sequence length instead)."""
    line = list(args)
    for flag, value in RUN_DEFAULTS:
        if flag not in line:
            line += [flag, value]
    if "--seq-length" not in line and "--encoder-seq-length" not in line and not hf_config:
        length = "4096"
        if "--max-position-embeddings" in line:
            length = line[line.index("--max-position-embeddings") + 1]
        line += ["--seq-length", length]
    return line


def other_launch_line(line):
    """LINE with its buckets padded the other way (--ddp-pad-buckets-for-high-nccl-busbw on
    or off): a launch whose DDP pads every stage's buckets to other sizes."""
    flag = "--ddp-pad-buckets-for-high-nccl-busbw"
    return [a for a in line if a != flag] if flag in line else list(line) + [flag]


def run_paramlayout(binary, world_size, hf_config, line, out_dir):
    command = [binary, "job", "--world-size", str(world_size), "-q", "-o", out_dir]
    if hf_config:
        command += ["--hf-config", hf_config]
    result = subprocess.run(command + ["--"] + line, capture_output=True, text=True)
    return result.returncode, (result.stderr or result.stdout).strip()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", required=True, help="the paramlayout program")
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--hf-config", help="a Hugging Face config.json (Megatron-Bridge builds)")
    parser.add_argument("--max-ranks", type=int, default=None,
                        help="check the shard ranges of at most this many dp ranks per buffer")
    parser.add_argument("--write-log", metavar="FILE",
                        help="also write the start-up log Megatron-LM's code wrote to FILE")
    parser.add_argument("--log-mutations", action="store_true",
                        help="also change the start-up log (LOG_MUTATIONS): check --against-log "
                             "must name each change")
    parser.add_argument("line", nargs=argparse.REMAINDER)
    opts = parser.parse_args()
    line = opts.line[1:] if opts.line[:1] == ["--"] else opts.line
    line = complete_line(line, opts.hf_config)

    import contextlib

    import megatron_runtime as runtime

    # Megatron-LM prints its progress on stdout: to stderr with it, so that stdout holds the
    # differences and the count only.
    with contextlib.redirect_stdout(sys.stderr):
        outcome = judge_line(opts, line, runtime)
    for text in outcome[1]:
        print(text)
    return outcome[0]


def judge_line(opts, line, runtime):
    """(exit code, the lines to print: the differences, then the count). The process's
    environment variables are restored afterwards (upstream code sets some)."""
    saved = dict(os.environ)
    try:
        return _judge_line(opts, line, runtime)
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _judge_line(opts, line, runtime):
    runtime.put_upstream_on_path()
    runtime.patch_gpu_queries()
    megatron_line = runtime.megatron_line(line)

    def count(identical, total):
        return f"real-model: {identical}/{total} chunks identical"

    reason = runtime.line_out_of_reach(line)
    if reason:
        return 3, [f"out of the judge's reach: {reason}", count(0, 0)]
    with tempfile.TemporaryDirectory(prefix="real-model-") as tmp:
        our_rc, our_message = run_paramlayout(opts.binary, opts.world_size, opts.hf_config, line,
                                              tmp)
        if getattr(opts, "log_mutations", False):
            opts.other_launch = tempfile.mkdtemp(prefix="other-launch-", dir=tmp)
            os.rmdir(opts.other_launch)
            run_paramlayout(opts.binary, opts.world_size, opts.hf_config,
                            other_launch_line(line), opts.other_launch)
        if our_rc not in (0, 2):
            return 1, [f"paramlayout: exit {our_rc}: {our_message}", count(0, 0)]
        try:
            provider = complete = None
            runtime.use_bridge(None)
            if opts.hf_config:
                import bridge_model
                provider = bridge_model.bridge_provider(opts.hf_config)
                complete = bridge_model.model_arguments(provider)
            args = runtime.read_arguments(megatron_line, opts.world_size, complete)
            reason = runtime.out_of_reach(args)
            if reason:
                raise runtime.OutOfReach(reason)
            if provider is not None:
                try:
                    build = bridge_model.bridge_model_provider(args, provider, line)
                except (AssertionError, ValueError) as e:
                    raise runtime.refusal(e) from None
                runtime.use_bridge(build)
            if our_rc == 2:
                total = sum(len(stage.chunks) for stage in runtime.build_job(args))
                return 1, [f"paramlayout refuses a line Megatron-LM accepts: {our_message}",
                           count(0, total)]
            diffs, identical, total = judge(runtime.build_job(args), Path(tmp), opts)
            if getattr(opts, "last_rank", False):
                diffs += judge_last_ranks(runtime.build_job(args, last=True), Path(tmp))
        except runtime.ArgumentsRefused as e:
            if our_rc == 2:
                agree, text = refusal_reasons.compare(str(e), e.names, our_message)
                return (2 if agree else 1), [text, count(0, 0)]
            return 1, [f"Megatron-LM refuses the line ({e}); paramlayout accepts it", count(0, 0)]
        except runtime.OutOfReach as e:
            return 3, [f"out of the judge's reach: {e}", count(0, 0)]
    return (0 if identical == total and not diffs else 1), diffs + [count(identical, total)]


class StartUpLog:
    """What Megatron-LM's start-up writes while the stages are built, as torchrun's
    `[rankR]:` prefix puts it on every line: DDP's bucket reports (its logger at INFO) and
    get_model's param counts (printed)."""

    LOGGER = "megatron.core.distributed.param_and_grad_buffer"

    def __init__(self):
        import logging
        self.lines = []
        self.logger = logging.getLogger(self.LOGGER)
        log = self

        class Handler(logging.Handler):
            def emit(self, record):
                log.add(record.getMessage())

        self.handler = Handler(logging.INFO)

    paused = False

    def add(self, text):
        if self.paused:
            return
        import torch
        rank = torch.distributed.get_rank()
        self.lines += [f"[rank{rank}]:{line}" for line in text.split("\n")]

    def write(self, text):  # get_model's prints, on their way to stderr
        sys.stderr.write(text)
        for line in text.splitlines():
            if "number of parameters on" in line:
                self.add(line)

    def flush(self):
        sys.stderr.flush()

    def __enter__(self):
        import contextlib
        self.level = self.logger.level
        self.logger.setLevel("INFO")
        self.logger.addHandler(self.handler)
        self.stdout = contextlib.redirect_stdout(self)
        self.stdout.__enter__()
        return self

    def __exit__(self, *exc):
        self.stdout.__exit__(*exc)
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)


# Each: how a log is changed (None: _structural_mutation), and what `check --against-log`
# must then name.
LOG_MUTATIONS = (
    ("a padded size",
     lambda t: _first_sub(r"(\d+) padded size", lambda m: f"{int(m[1]) + 64} padded size", t),
     "padded size: log"),
    ("a main-grad dtype",
     lambda t: _first_sub(r"dtype=torch\.(\w+)\)", lambda m: "dtype=torch.float64)", t),
     "main_grad dtype: log float64"),
    ("a param moved to the next bucket", None, "bucket 2, job bucket 1"),
    ("a bucket dropped", None, "buckets: log"),
)


def _first_sub(pattern, replace, text):
    import re
    return re.sub(pattern, replace, text, count=1)


def judge_log(binary, out_dir, lines, mutations):
    """`check --against-log` on the start-up log: it must agree; with `mutations`, each
    change to the log must be named."""
    log = out_dir / "start-up.log"
    found = []

    def check(text):
        log.write_text(text)
        r = subprocess.run([binary, "check", str(out_dir), "--against-log", str(log)],
                           capture_output=True, text=True)
        return r.returncode, (r.stdout + r.stderr).strip()

    text = "\n".join(lines) + "\n"
    rc, output = check(text)
    if rc != 0:
        found.append(f"check --against-log on Megatron-LM's start-up log: exit {rc}: {output}")
    if not mutations:
        return found
    for what, change, expected in LOG_MUTATIONS:
        if change is None:
            changed = _structural_mutation(what, lines)
            if changed is None:
                found.append(f"the start-up log has no report of two buckets to change ({what})")
                continue
        else:
            changed = change(text)
        rc, output = check(changed)
        if rc != 1 or expected not in output:
            found.append(f"check --against-log misses {what}: exit {rc}: {output[:400]}")
    return found


def judge_check_model(stage, out_dir, opts):
    """paramlayout.megatron.check_model on the stage's DDP chunks: it must pass against the
    job; with opts.log_mutations, it must raise against the job of another launch
    (other_launch_line)."""
    from paramlayout.megatron import ModelMismatch, check_model
    found = []
    try:
        check_model(str(out_dir / "job.json"), stage.chunks, pp_rank=stage.stage,
                    binary=opts.binary)
    except ModelMismatch as e:
        found.append(f"check_model raises on the planned model: {e}")
    other = getattr(opts, "other_launch", None)
    if other:
        try:
            check_model(str(Path(other) / "job.json"), stage.chunks, pp_rank=stage.stage,
                        binary=opts.binary)
            found.append(f"check_model passes stage {stage.stage} against another launch's job")
        except ModelMismatch:
            pass
    return found


def _structural_mutation(what, lines):
    """The log with its first two-bucket report changed: the first bucket's last param moved
    to the second bucket, or the last bucket dropped (and the count with it)."""
    import re
    for i, line in enumerate(lines):
        m = re.search(r"Number of buckets for gradient all-reduce / reduce-scatter: (\d+)", line)
        if not m or int(m[1]) < 2:
            continue
        end = i + 1
        while end < len(lines) and ("Params for bucket" in lines[end] or "main_grad" in lines[end]):
            end += 1
        report = lines[i:end]
        heads = [j for j, l in enumerate(report) if "Params for bucket" in l]
        if what == "a bucket dropped":
            changed = report[:heads[-1]]
            changed[0] = line.replace(f": {m[1]}", f": {int(m[1]) - 1}")
        else:
            changed = list(report)
            moved = changed.pop(heads[1] - 1)
            changed.insert(heads[1], moved)
        return "\n".join(lines[:i] + changed + lines[end:]) + "\n"
    return None


def judge(built, out_dir, opts):
    import real_model_compare as compare
    from paramlayout.megatron import job_param_layout

    job = json.loads((out_dir / "job.json").read_text())
    files = {(c["stage"], c["chunk"]): c for c in job["chunks"]}
    seen = set()
    with StartUpLog() as start_up:
        diffs, identical, total = _judge_stages(built, out_dir, opts, job, files, seen, compare,
                                                job_param_layout, start_up)
    if getattr(opts, "write_log", None):
        Path(opts.write_log).write_text("\n".join(start_up.lines) + "\n")
    diffs += judge_log(opts.binary, out_dir, start_up.lines, getattr(opts, "log_mutations", False))
    for key in sorted(files.keys() - seen):
        diffs.append(f"stage {key[0]} chunk {key[1]}: chunk: Megatron-LM absent, "
                     "paramlayout present")
    return diffs, identical, total


def judge_last_ranks(built, out_dir):
    """Each stage built again at its last rank (the last tensor, context, expert and data
    parallel rank): its params and buffers must be the manifests' and layouts' its first rank
    was judged against, which job writes once for every rank of the stage."""
    import real_model_compare as compare

    job = json.loads((out_dir / "job.json").read_text())
    files = {(c["stage"], c["chunk"]): c for c in job["chunks"]}
    diffs = []
    for stage in built:
        for c, ddp in enumerate(stage.chunks):
            where = f"stage {stage.stage} chunk {c} at its last rank ({stage.rank})"
            entry = files.get((stage.stage, c))
            if entry is None:
                diffs.append(f"{where}: chunk: Megatron-LM present, paramlayout absent")
                continue
            _, _, _, found = _chunk_against_files(stage, c, ddp, out_dir, entry, compare)
            diffs += _difference_lines(where, found)
    return diffs


def _chunk_against_files(stage, c, ddp, out_dir, entry, compare):
    """Chunk C of STAGE (DDP-wrapped: DDP) against the manifest and layout job.json's ENTRY
    names: (the module, its params' names by id, the layout, the differences found)."""
    manifest = json.loads((out_dir / entry["manifest"]).read_text())
    layout = json.loads((out_dir / entry["layout"]).read_text())
    module = stage.inner(c)
    names = {id(p): n for n, p in module.named_parameters()}
    found = compare.compare_params(module, manifest)
    found += compare.compare_buffers(ddp, names, layout)
    return module, names, layout, found


def _difference_lines(where, found):
    """Each difference FOUND (a sentence, or (what, field, Megatron-LM's, paramlayout's)) as
    the line the judge prints."""
    lines = []
    for item in found:
        if isinstance(item, str):
            lines.append(f"{where}: {item}")
        else:
            what, field, mine, yours = item
            lines.append(f"{where}: {what}: {field}: Megatron-LM {mine}, paramlayout {yours}")
    return lines


def _judge_stages(built, out_dir, opts, job, files, seen, compare, job_param_layout, start_up):
    diffs, identical, total = [], 0, 0
    for stage in built:
        diffs += judge_check_model(stage, out_dir, opts)
        for c, ddp in enumerate(stage.chunks):
            total += 1
            seen.add((stage.stage, c))
            where = f"stage {stage.stage} chunk {c}"
            entry = files.get((stage.stage, c))
            if entry is None:
                diffs.append(f"{where}: chunk: Megatron-LM present, paramlayout absent")
                continue
            module, names, layout, found = _chunk_against_files(stage, c, ddp, out_dir, entry,
                                                                compare)
            found += compare.compare_shards(ddp, names, layout, opts.max_ranks)
            try:
                full = job_param_layout(str(out_dir / "job.json"), module, pp_rank=stage.stage,
                                        vp_stage=c)
                # A second DDP of the same chunk: not in a start-up's log.
                start_up.paused = True
                try:
                    again = stage.rewrap(c, full)
                finally:
                    start_up.paused = False
                found += [(f"full_param_layout: {w}", f, m, o)
                          for (w, f, m, o) in compare.compare_buffers(again, names, layout)]
            except Exception as e:  # Megatron-LM (or the package) refusing our layout
                found.append(f"full_param_layout: Megatron-LM's DDP refuses paramlayout's layout: "
                             f"{type(e).__name__}: {e}")
            diffs += _difference_lines(where, found)
            identical += not found
    return diffs, identical, total


if __name__ == "__main__":
    sys.exit(main())
