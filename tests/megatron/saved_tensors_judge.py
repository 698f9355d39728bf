#!/usr/bin/env python3
"""Megatron-LM's own GPT model, run on the CPU, as the judge of `job`'s activation memory.

    saved_tensors_judge.py BINARY

For each case, `job` plans a small bf16 GPT (`--transformer-impl local`, seq 128, micro
batch 2) and gives the decoder layers' activations of stage 0 (memory.stages[0].activations.
decoder_layers, Korthikanti et al. 2022 Table 2). The judge builds the same model with
Megatron-LM's GPTModel over get_gpt_layer_local_spec(), a TransformerConfig as Megatron-LM's
training arguments make it for the line (bf16 params in Float16Module, hidden and attention
dropout 0.1, biases, bias-activation and bias-dropout-add fusion on, softmax in bf16), runs
one micro batch forward and backward in training mode, and counts what autograd saves for
backward while each TransformerLayer runs (torch.autograd.graph.saved_tensors_hooks): every
storage once, by its data pointer, at its storage's nbytes, params' storages excluded (the
weights a linear layer saves are not activations). Embedding, final norm, output layer and
loss run outside the layers and are not counted. The sum over the layers must be job's figure
within the slack below. tp 2 runs as two gloo processes (torch.multiprocessing) on one file://
store; each rank counts its own layers, rank 0's count is compared with job's per-rank figure.

What the CPU changes, and how the judge puts it back as a GPU run has it:
- torch's CPU dropout saves its noise in the input's dtype (2 bytes); CUDA's fused
  native_dropout saves a bool mask (1 byte), as Table 2 counts. F.dropout is routed to
  torch.native_dropout, whose CPU kernel saves the bool mask as CUDA's does.
- Megatron-LM's jit_fuser (torch.compile) is disabled before its fusions are imported: the
  fused bias-GeLU and SwiGLU are autograd Functions whose save_for_backward is the same
  eager or compiled; the fused bias-dropout-add then runs eagerly (saves the dropout mask).
- the masked-softmax CUDA kernel is absent; torch's softmax saves its (bf16) output as the
  kernel saves softmax_results. The CUDA RNG tracker's fork() is a no-op context, and
  torch.cuda.current_device() answers the CPU (where the attention's score buffer goes).

Tolerance: none, on the tensors Table 2 counts. Table 2 leaves out, per layer, the two layer
norms' mean and rstd (vectors of s*b each; fp32 on CUDA, bf16 on the CPU) and, once for all
layers, the causal mask (s^2 bools, one storage every layer's masked_fill saves); biases are
params (excluded) and the residual is the norm's input (one storage). The judge names those
tensors (a norm's [s, b, 1] outputs, the [1, 1, s, s] bool mask), reports them apart, and
compares the rest with job's figure exactly: every Table 2 term is the size of one tensor, so
a percentage would only hide a missing term (one sbh is 1.4% of a layer here, where the
as^2 b terms dominate at s = 128), and the left-out terms, at 16sb per layer, would not.

Run with any python3: it runs itself again in tools/megatron-env.sh's python; exit 77 (skipped)
with the reason where that environment cannot be made. Exit 0 all agree, 1 a difference.
"""
import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from real_model_suite import judge_binary  # noqa: E402

SEQ, MICRO_BATCH, VOCAB = 128, 2, 1024
MODEL = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--seq-length", str(SEQ), "--max-position-embeddings", str(SEQ),
         "--vocab-size", str(VOCAB), "--micro-batch-size", str(MICRO_BATCH),
         "--transformer-impl", "local", "--bf16"]
# (name, tensor-parallel size, launch-line extras). With GQA, the local DotProductAttention
# saves K and V after repeat_interleave to every head (dot_product_attention.py, "expand the
# key and value"): 2sb(3ad)/t for Q, K, V, as for MHA, not Table 2's 2sb(ad + 2gd)/t.
CASES = [
    ("MHA, f = 4h", 1, ["--ffn-hidden-size", "256"]),
    ("GQA, 2 groups", 1, ["--ffn-hidden-size", "256", "--group-query-attention",
                          "--num-query-groups", "2"]),
    ("SwiGLU", 1, ["--ffn-hidden-size", "176", "--swiglu"]),
    ("MHA, tp 2", 2, ["--ffn-hidden-size", "256"]),
    ("GQA + SwiGLU, tp 2", 2, ["--ffn-hidden-size", "176", "--swiglu",
                               "--group-query-attention", "--num-query-groups", "2"]),
]


def value(args, flag, default=None):
    return args[args.index(flag) + 1] if flag in args else default


def job_decoder_bytes(binary, tp, args):
    """job's decoder-layer activation bytes for stage 0 (per rank)."""
    out = Path(tempfile.mkdtemp(prefix="saved-tensors-judge-")) / "job"
    line = args + ["--tensor-model-parallel-size", str(tp)]
    subprocess.run([binary, "job", "--world-size", str(tp), "-q", "-o", str(out), "--"] + line,
                   check=True)
    memory = json.loads((out / "job.json").read_text())["memory"]
    return memory["stages"][0]["activations"]


def patch_for_cpu():
    """The CPU stand-ins the docstring lists; before Megatron-LM's model code is imported."""
    import contextlib
    import torch
    import torch.nn.functional as F
    import megatron.core.jit as mjit

    mjit.disable_jit_fuser()
    plain_dropout = F.dropout

    def dropout(input, p=0.5, training=True, inplace=False):
        if training and 0 < p < 1 and input.numel() > 0:
            return torch.native_dropout(input, p, True)[0]  # what CUDA's dropout calls
        return plain_dropout(input, p, training, inplace)

    F.dropout = dropout
    torch.cuda.current_device = lambda: torch.device("cpu")  # the attention's score buffer
    from megatron.core.tensor_parallel import random as mrandom
    mrandom.CudaRNGStatesTracker.fork = lambda self, *a, **k: contextlib.nullcontext()


def transformer_config(tp, args):
    """The TransformerConfig core_transformer_config_from_args makes of the line (the
    arguments' defaults where they differ from TransformerConfig's)."""
    import torch
    import torch.nn.functional as F
    from megatron.core.transformer.transformer_config import TransformerConfig
    heads = int(value(args, "--num-attention-heads"))
    swiglu = "--swiglu" in args
    return TransformerConfig(
        num_layers=int(value(args, "--num-layers")),
        hidden_size=int(value(args, "--hidden-size")),
        num_attention_heads=heads,
        ffn_hidden_size=int(value(args, "--ffn-hidden-size")),
        num_query_groups=int(value(args, "--num-query-groups", heads)),
        tensor_model_parallel_size=tp,
        bf16=True, params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16,
        hidden_dropout=0.1, attention_dropout=0.1,
        gated_linear_unit=swiglu, activation_func=F.silu if swiglu else F.gelu,
        bias_activation_fusion=True, bias_dropout_fusion=True,
        masked_softmax_fusion=False, attention_softmax_in_fp32=False,
        persist_layer_norm=False, gradient_accumulation_fusion=False,
        use_cpu_initialization=True, perform_initialization=True)


class SavedTensors:
    """saved_tensors_hooks' pack: each storage saved while a decoder layer runs, once, by the
    layer and the innermost module running at the time; params' storages left out."""

    def __init__(self, model, layers):
        self.params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self.seen = set()
        self.layer = None
        self.modules = []
        self.by_layer = defaultdict(list)  # layer -> [(module, shape, dtype, bytes)]
        self.outside = 0
        for n, layer in enumerate(layers):
            for name, module in layer.named_modules():
                module.register_forward_pre_hook(self._enter(n, name or "layer"))
                module.register_forward_hook(self._leave(name or "layer"))

    def _enter(self, n, name):
        def hook(module, inputs):
            self.layer = n if self.layer is None else self.layer
            self.modules.append(name)
        return hook

    def _leave(self, name):
        def hook(module, inputs, output):
            self.modules.pop()
            if not self.modules:
                self.layer = None
        return hook

    def pack(self, t):
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key in self.params or key in self.seen or storage.nbytes() == 0:
            return t
        self.seen.add(key)
        if self.layer is None:
            self.outside += storage.nbytes()
        else:
            shape = tuple(t.shape) if t.numel() * t.element_size() == storage.nbytes() \
                else ("storage", storage.nbytes())
            self.by_layer[self.layer].append((self.modules[-1], shape, str(t.dtype)
                                              .replace("torch.", ""), storage.nbytes()))
        return t

    @staticmethod
    def unpack(t):
        return t


def measure(rank, tp, args, store):
    """Build the model at RANK of a tp-rank gloo world, run it forward (counting) and
    backward; rank 0's counts as a dict."""
    import torch
    import torch.distributed as dist
    patch_for_cpu()
    from megatron.core import parallel_state as mpu
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.module import Float16Module

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=tp)
    mpu.initialize_model_parallel(tensor_model_parallel_size=tp)
    try:
        torch.manual_seed(1234)
        config = transformer_config(tp, args)
        gpt = GPTModel(config, get_gpt_layer_local_spec(), vocab_size=VOCAB,
                       max_sequence_length=SEQ, position_embedding_type="learned_absolute")
        model = Float16Module(config, gpt)
        model.train()
        counter = SavedTensors(model, gpt.decoder.layers)
        tokens = torch.randint(0, VOCAB, (MICRO_BATCH, SEQ))
        positions = torch.arange(SEQ).unsqueeze(0).expand(MICRO_BATCH, SEQ)
        labels = torch.randint(0, VOCAB, (MICRO_BATCH, SEQ))
        # the causal mask as get_ltor_masks_and_position_ids makes it (True: masked out)
        mask = torch.triu(torch.ones(1, 1, SEQ, SEQ, dtype=torch.bool), diagonal=1)
        with torch.autograd.graph.saved_tensors_hooks(counter.pack, counter.unpack):
            loss = model(tokens, positions, mask, labels=labels)
        loss.float().sum().backward()
        grads = sum(p.grad is not None or getattr(p, "main_grad", None) is not None
                    for p in model.parameters())
        result = {"layers": [counter.by_layer[n] for n in range(len(gpt.decoder.layers))],
                  "outside": counter.outside, "params_with_grad": grads,
                  "params": sum(1 for _ in model.parameters())}
    finally:
        mpu.destroy_model_parallel()
        dist.destroy_process_group()
    return result


def _spawned(rank, tp, args, store, out):
    import logging
    import warnings
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    result = measure(rank, tp, args, store)
    if rank == 0:
        Path(out).write_text(json.dumps(result))


def megatron_counts(tp, args):
    """measure() in TP fresh processes (a fresh torch.distributed each), rank 0's result."""
    import torch.multiprocessing as mp
    scratch = Path(tempfile.mkdtemp(prefix="saved-tensors-judge-"))
    store, out = scratch / "store", scratch / "result.json"
    os.environ.setdefault("PYTHONWARNINGS", "ignore")  # the children's import-time warnings
    mp.spawn(_spawned, args=(tp, args, str(store), str(out)), nprocs=tp, join=True)
    return json.loads(out.read_text())


def table2_terms(tp, args):
    """Table 2's terms for one layer (bytes), named, for the breakdown."""
    s, b = SEQ, MICRO_BATCH
    h, a = int(value(args, "--hidden-size")), int(value(args, "--num-attention-heads"))
    f = int(value(args, "--ffn-hidden-size"))
    d = h // a
    groups = int(value(args, "--num-query-groups", a))
    fc1 = 2 * f if "--swiglu" in args else f
    return [("norm inputs 2 x 2sbh", 4 * s * b * h),
            ("QKV input 2sbh + proj dropout mask sbh", 3 * s * b * h),
            ("Q, K, V 2sb(q + kv)/t, kv = 2gd", 2 * s * b * (a * d + 2 * groups * d) // tp),
            ("softmax out, mask, dropout out 5as^2b/t", 5 * a * s * s * b // tp),
            ("context (proj input) 2sb(a d)/t", 2 * s * b * a * d // tp),
            ("fc1 input 2sbh + fc2 dropout mask sbh", 3 * s * b * h),
            ("fc1 out + fc2 input 2sb(fc1 + f)/t", 2 * s * b * (fc1 + f) // tp)]


def not_in_table2(saved):
    """A layer norm's mean or rstd ([s, b, 1]) or the causal mask ([1, 1, s, s] bools)."""
    module, shape, dtype, _ = saved
    return (module.endswith("layernorm") and shape[-1] == 1) or \
        (dtype == "bool" and list(shape) == [1, 1, SEQ, SEQ])


def print_breakdown(layer, terms):
    print("    layer 0's saved tensors (module saving, shape, dtype, bytes in all, count):")
    grouped = defaultdict(lambda: [0, 0])
    for saved in layer:
        module, shape, dtype, nbytes = saved
        key = (module, str(shape), dtype, not_in_table2(saved))
        grouped[key][0] += 1
        grouped[key][1] += nbytes
    for (module, shape, dtype, left_out), (count, nbytes) in grouped.items():
        times = f" x{count}" if count > 1 else ""
        aside = "  (not in Table 2)" if left_out else ""
        print(f"      {module:<48} {shape:<18} {dtype:<9} {nbytes:>8}{times}{aside}")
    print(f"      total {sum(t[3] for t in layer)}; Table 2's terms: "
          + ", ".join(f"{name} {n}" for name, n in terms)
          + f" = {sum(n for _, n in terms)}")


def main():
    binary = judge_binary(__doc__, __file__)
    if isinstance(binary, int):
        return binary
    failed = 0
    for name, tp, extra in CASES:
        args = MODEL + extra
        activations = job_decoder_bytes(binary, tp, args)
        ours = activations["decoder_layers"]
        counts = megatron_counts(tp, args)
        layers = len(counts["layers"])
        saved = [t for layer in counts["layers"] for t in layer]
        total = sum(t[3] for t in saved)
        left_out = sum(t[3] for t in saved if not_in_table2(t))
        theirs = total - left_out
        agree = theirs == ours
        failed += not agree
        print(f"{name}: {' '.join(extra)} --tensor-model-parallel-size {tp}: Megatron-LM saves "
              f"{total} B in its {layers} layers, {left_out} B of them outside Table 2 (norm "
              f"statistics, causal mask); Table 2's tensors {theirs} B, paramlayout {ours} B, "
              f"ratio {ours / theirs:.4f}, difference {theirs - ours:+} B: "
              f"{'agree' if agree else 'DIFFER'}")
        print(f"    backward ran: {counts['params_with_grad']}/{counts['params']} params got a "
              f"grad; outside the layers (not compared) Megatron-LM saves {counts['outside']} B, "
              f"paramlayout's embedding + output_and_loss {activations['embedding']} + "
              f"{activations['output_and_loss']} B")
        print_breakdown(counts["layers"][0], table2_terms(tp, args))
    print(f"saved-tensors judge: {len(CASES) - failed}/{len(CASES)} agree")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
