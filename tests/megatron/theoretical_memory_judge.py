#!/usr/bin/env python3
"""Megatron-LM's own activation estimate set beside `job`'s.

    theoretical_memory_judge.py BINARY

For each launch line, Megatron-LM's parse_args and validate_args read it, and
megatron/training/theoretical_memory_usage.py's compute_activation_memory (Korthikanti et
al. 2022's Table 2 for the first pipeline stage, the memory Megatron-LM reports with
--log-memory-to-tensorboard) runs on those args with the line's micro-batches per step.
`job` plans the same line. Upstream's function assumes selective recompute with sequence
parallelism, multi-head attention and a non-gated MLP, so the lines are of that kind: there
both claim the same terms, and they must agree.

Upstream's figure is split into its terms by running it again: with num_layers = 0 it is the
embedding (and at pp 1 the output layer and loss), the rest is the decoder layers'. Then:
- decoder layers: upstream's L x per-layer x (interleaved: 1 + (p-1)/(pv); 1F1B: min(1, M/p))
  must equal `job`'s stage-0 decoder_layers (the schedule's own warm-up count times its
  chunk's layers) to within rounding;
- embedding, output and loss: upstream divides the int64 token ids (8sb) by tp, which every
  tensor-parallel rank holds whole; `job` does not. Where the schedule is not interleaved the
  two must differ by exactly that, 8sb x in-flight x (1 - 1/t). Under the interleaved schedule
  upstream charges every in-flight micro-batch an embedding, `job` only those of the first
  chunk: the difference is printed, not judged (docs/memory.md).

Runs itself again in tools/megatron-env.sh's python; exit 77 (skipped) with the reason where
that environment cannot be made. Exit 0 all agree, 1 a difference.
"""
import contextlib
import copy
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from real_model_suite import judge_binary  # noqa: E402

MODEL = ["--num-layers", "8", "--hidden-size", "256", "--num-attention-heads", "8",
         "--ffn-hidden-size", "1024", "--seq-length", "512", "--max-position-embeddings", "512",
         "--vocab-size", "1000", "--bf16", "--sequence-parallel", "--recompute-activations",
         "--micro-batch-size", "2"]
# (world size, parallel sizes and batch): dp 2 throughout.
LINES = [
    (4, ["--tensor-model-parallel-size", "2", "--global-batch-size", "8"]),
    (16, ["--tensor-model-parallel-size", "4", "--pipeline-model-parallel-size", "2",
          "--global-batch-size", "32"]),
    (16, ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "4",
          "--global-batch-size", "4"]),
    (8, ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
         "--num-layers-per-virtual-pipeline-stage", "2", "--global-batch-size", "16"]),
]


def job_stage0(binary, world, line):
    out = Path(tempfile.mkdtemp(prefix="theoretical-memory-judge-")) / "job"
    subprocess.run([binary, "job", "--world-size", str(world), "-q", "-o", str(out), "--"] +
                   line, check=True)
    return json.loads((out / "job.json").read_text())["memory"]["stages"][0]


def upstream_terms(line, world):
    from megatron_runtime import patch_gpu_queries, put_upstream_on_path, read_arguments
    put_upstream_on_path()
    patch_gpu_queries()
    from megatron.training.theoretical_memory_usage import compute_activation_memory
    with contextlib.redirect_stdout(io.StringIO()):  # validate_args prints every argument
        args = read_arguments(line, world)
    microbatches = args.global_batch_size // (args.micro_batch_size * args.data_parallel_size)
    whole = compute_activation_memory(copy.deepcopy(args), microbatches)
    no_layers = copy.deepcopy(args)
    no_layers.num_layers = 0
    edges = compute_activation_memory(no_layers, microbatches)
    return args, whole - edges, edges


def main():
    binary = judge_binary(__doc__, __file__)
    if isinstance(binary, int):
        return binary
    import warnings
    warnings.filterwarnings("ignore")
    failed = 0
    for world, sizes in LINES:
        line = MODEL + sizes
        args, layers, edges = upstream_terms(line, world)
        ours = job_stage0(binary, world, line)
        t, s, b = args.tensor_model_parallel_size, args.seq_length, args.micro_batch_size
        got = ours["activations"]
        layers_agree = abs(got["decoder_layers"] - layers) <= 1e-9 * layers + 1
        ours_edges = got.get("embedding", 0) + got.get("output_and_loss", 0)
        ids = 8 * s * b * ours["microbatches_in_flight"] * (1 - 1 / t)
        interleaved = args.virtual_pipeline_model_parallel_size is not None
        edges_agree = interleaved or abs(ours_edges - edges - ids) <= 1e-9 * edges + 1
        verdict = "agree" if layers_agree and edges_agree else "DIFFER"
        failed += verdict != "agree"
        print(f"{' '.join(sizes)}: decoder layers paramlayout {got['decoder_layers']} B, "
              f"Megatron-LM {layers:.0f} B; embedding and output paramlayout {ours_edges} B, "
              f"Megatron-LM {edges:.0f} B (token ids split by tp there: "
              f"{'not judged, interleaved' if interleaved else f'{ids:.0f} B'}): {verdict}")
    print(f"theoretical-memory judge: {len(LINES) - failed}/{len(LINES)} agree")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
