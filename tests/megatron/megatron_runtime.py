"""Megatron-LM's own training code, run in one process on the CPU: its argument reading, its
model-parallel groups over torch's fake process group, and its `training.get_model`, which
builds every virtual chunk of one pipeline stage with the upstream builders, wraps each in
Float16Module and in its own DistributedDataParallel.

Nothing here re-implements Megatron-LM. What needs a GPU to answer is patched, and only that
(docs/exactness.md lists each patch with its reason):

- device queries: `torch.cuda.get_device_capability` and `get_device_properties` answer 9.0,
  an H100/H200, the target; `torch.cuda.current_device()` answers the meta device, so every
  explicit placement (`device=torch.cuda.current_device()`) lands on meta: no memory for
  weights or buffers;
- `nn.Module.cuda()` and `Tensor.cuda()` keep a module or tensor where it is; CUDA streams
  are no-ops;
- the CUDA RNG tracker's `fork()` is a no-op context (it saves and restores CUDA RNG state);
- a tensor made with an explicit CUDA device (`device="cuda"`) is made on meta (a torch
  function mode), for code that names the device instead of asking for it;
- the model is built under `torch.device("meta")`, as `--init-model-with-meta-device` does,
  and not materialized afterwards (`to_empty_if_meta_device` would allocate on the GPU).
"""
import contextlib
import io
import os
import sys
import warnings

import refusal_reasons


def put_upstream_on_path():
    """A checkout named by MEGATRON_LM goes first on sys.path (else the environment's .pth
    names the unpacked tarballs)."""
    checkout = os.environ.get("MEGATRON_LM")
    if checkout and os.path.isdir(os.path.join(checkout, "megatron")):
        sys.path.insert(0, checkout)


class _NoStream:
    """Stands in for torch.cuda.Stream: DDP's initialization stream and its waits."""

    def __init__(self, *args, **kwargs):
        pass

    def wait_stream(self, *args, **kwargs):
        pass

    def wait_event(self, *args, **kwargs):
        pass

    def synchronize(self):
        pass


class _H100:
    """What torch.cuda.get_device_properties says on an H100 (compute capability 9.0)."""
    name = "NVIDIA H100 80GB HBM3"
    major, minor = 9, 0
    total_memory = 80 * 2**30
    multi_processor_count = 132


_PATCHED = False


def _stand_in_mamba_kernels():
    """mamba_ssm installs without its CUDA build (MAMBA_SKIP_CUDA_BUILD), but its package
    imports the CUDA extension `selective_scan_cuda` at import time; an empty module stands in
    for it, so that Megatron-LM's Mamba layer finds mamba_ssm's Python modules (the gated
    RMSNorm whose params it registers). The kernels are called only in forward."""
    import types
    try:
        import selective_scan_cuda  # noqa: F401
    except ImportError:
        sys.modules["selective_scan_cuda"] = types.ModuleType("selective_scan_cuda")


def patch_gpu_queries():
    """The patches listed in the module's docstring, applied once before Megatron-LM runs."""
    global _PATCHED
    if _PATCHED:
        return
    _PATCHED = True
    import torch

    _stand_in_mamba_kernels()

    try:
        import transformer_engine  # noqa: F401  (a real TE: used as it is)
    except ImportError:
        import te_standin
        te_standin.install()
    meta = torch.device("meta")
    torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
    torch.cuda.get_device_properties = lambda *a, **k: _H100
    torch.cuda.current_device = lambda: meta
    torch.cuda.Stream = _NoStream
    torch.cuda.current_stream = lambda *a, **k: _NoStream()
    torch.cuda.stream = lambda *a, **k: contextlib.nullcontext()
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.empty_cache = lambda *a, **k: None
    torch.nn.Module.cuda = lambda self, *a, **k: self
    torch.Tensor.cuda = lambda self, *a, **k: self

    from megatron.core.tensor_parallel import random as mrandom

    mrandom.CudaRNGStatesTracker.fork = lambda self, *a, **k: contextlib.nullcontext()
    warnings.filterwarnings("ignore")


class ArgumentsRefused(Exception):
    """Megatron-LM's parse_args or validate_args (or its model builders) refused the line;
    `names`: the argument dests its reason names (refusal_reasons.py)."""

    def __init__(self, message, names=frozenset()):
        super().__init__(message)
        self.names = frozenset(names)


class OutOfReach(Exception):
    """The line needs what the judge cannot build on the CPU."""


def apex_importable():
    try:
        import apex  # noqa: F401
        return True
    except ImportError:
        return False


def megatron_line(line):
    """The line Megatron-LM reads. Where apex (which has no PyPI build) is absent, the line
    also gets --no-gradient-accumulation-fusion, and a `--transformer-impl local` line
    --no-persist-layer-norm: both only choose apex kernels (its fused weight-gradient GEMM,
    its persistent layer norm) and build the same params; without them Megatron-LM refuses to
    build a ColumnParallelLinear (the output layer, every local linear layer) or a local layer
    norm when apex is missing."""
    line = list(line)
    impl = line[line.index("--transformer-impl") + 1] if "--transformer-impl" in line else None
    if not apex_importable():
        flags = ["--no-gradient-accumulation-fusion"]
        if impl == "local":
            flags.append("--no-persist-layer-norm")
        line += [f for f in flags if f not in line]
    return line


@contextlib.contextmanager
def _learning_options():
    """Megatron-LM's parser, once, taught to refusal_reasons as it parses."""
    import argparse
    original = argparse.ArgumentParser.parse_args

    def parse(self, *args, **kwargs):
        refusal_reasons.learn_options(self)
        return original(self, *args, **kwargs)

    argparse.ArgumentParser.parse_args = parse
    try:
        yield
    finally:
        argparse.ArgumentParser.parse_args = original


# The files each tokenizer type reads (build_tokenizer.py:36-80), by the dests that name them.
TOKENIZER_FILES = {
    "GPT2BPETokenizer": ("vocab_file", "merge_file"),
    "SentencePieceTokenizer": ("tokenizer_model",),
    "GPTSentencePieceTokenizer": ("tokenizer_model",),
    "Llama2Tokenizer": ("tokenizer_model",),
    "HuggingFaceTokenizer": ("tokenizer_model",),
    "TikTokenizer": ("tokenizer_model",),
    "NullTokenizer": (),
}


def tokenizer_files_here(args):
    """Whether Megatron-LM's build_tokenizer can read the line's tokenizer on this machine:
    a type it builds from files that all exist here, or NullTokenizer with --vocab-size."""
    kind = getattr(args, "tokenizer_type", None)
    if kind not in TOKENIZER_FILES:
        return False
    if kind == "NullTokenizer":
        return bool(args.vocab_size)
    paths = [getattr(args, dest, None) for dest in TOKENIZER_FILES[kind]]
    return all(p and os.path.exists(p) for p in paths)


def read_arguments(argv, world_size, model_arguments=None):
    """Megatron-LM's own parse_args and validate_args on ARGV at WORLD_SIZE, then its own
    build_tokenizer where the line's tokenizer needs no file or its files are here (offline);
    otherwise --vocab-size is taken as the tokenizer's size, padded as build_tokenizer pads it.
    MODEL_ARGUMENTS(args, given), where given, sets the model's arguments on the parsed line
    before it is validated (GIVEN: the dests the line set)."""
    from megatron.training import arguments, global_vars
    from megatron.core.tokenizers.utils.build_tokenizer import vocab_size_with_padding

    # Megatron-LM's launch scripts export it; validate_args requires it for tp or cp > 1.
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    os.environ["WORLD_SIZE"] = str(world_size)
    os.environ["RANK"] = "0"
    os.environ["LOCAL_RANK"] = "0"
    saved = sys.argv
    sys.argv = ["pretrain_gpt.py"] + list(argv)
    parser_error = io.StringIO()
    try:
        with contextlib.redirect_stderr(parser_error), _learning_options():
            args = arguments.parse_args()
            if model_arguments is not None:
                sys.argv = sys.argv[:1]
                defaults = vars(arguments.parse_args())
                model_arguments(args, {k for k, v in vars(args).items()
                                       if k not in defaults or defaults[k] != v})
        arguments.validate_args(args, {"tokenizer_type": "GPT2BPETokenizer"})
        if tokenizer_files_here(args):
            from megatron.core.tokenizers.utils.build_tokenizer import build_tokenizer
            os.environ["HF_HUB_OFFLINE"] = "1"
            build_tokenizer(args)
    except SystemExit as e:
        printed = parser_error.getvalue().strip()
        sys.stderr.write(printed + "\n")
        last = printed.splitlines()[-1] if printed else "nothing printed"
        raise ArgumentsRefused(f"parse_args exited ({e.code}): {last}",
                               refusal_reasons.names_in_text(printed)) from None
    except (AssertionError, ValueError, TypeError, RuntimeError, KeyError) as e:
        if os.environ.get("REAL_MODEL_DEBUG"):
            import traceback
            traceback.print_exc()
        raise refusal(e) from None
    finally:
        sys.argv = saved
    if getattr(args, "padded_vocab_size", None) is None and getattr(args, "vocab_size", None):
        if getattr(args, "pad_vocab_size", True):
            args.padded_vocab_size = vocab_size_with_padding(args.vocab_size, args, False)
        else:
            args.padded_vocab_size = args.vocab_size
    global_vars.unset_global_variables()  # a previous line's, in the same process
    global_vars.set_global_variables(args, build_tokenizer=False)
    return args


FSDP_FLAGS = ("--use-megatron-fsdp", "--use-torch-fsdp2", "--use-custom-fsdp")
QUANTIZED_FLAGS = ("--fp8-param-gather", "--fp4-param-gather", "--fp8-param", "--fp4-param")


def line_out_of_reach(line):
    """Why the launch line is out of the judge's reach, or None: read from the line itself,
    since Megatron-LM's own checks for these need the GPU settings they imply."""
    if any(f in line for f in FSDP_FLAGS):
        return "FSDP shards params itself; the judge builds DistributedDataParallel only"
    if any(f in line for f in QUANTIZED_FLAGS):
        return ("quantized params are Transformer Engine tensors that need a GPU; their rules "
                "are cited from TE's and Megatron-LM's code instead")
    return None


def out_of_reach(args):
    """Why the line, as Megatron-LM read it, is out of the judge's reach, or None."""
    if getattr(args, "use_torch_fsdp2", False) or getattr(args, "use_megatron_fsdp", False):
        return "FSDP shards params itself; the judge builds DistributedDataParallel only"
    if getattr(args, "fp8_param_gather", False) or getattr(args, "fp4_param_gather", False):
        return ("quantized params are Transformer Engine tensors that need a GPU; their rules "
                "are cited from TE's and Megatron-LM's code instead")
    spec = getattr(args, "spec", None)
    if spec and not str(spec[0]).startswith("megatron."):
        return f"a custom --spec module ({spec[0]}) builds layers the judge cannot know"
    return None


def stage_rank(args, stage, last=False):
    """The first (LAST: the last) global rank of pipeline stage STAGE ('tp-cp-ep-dp-pp' puts
    pp outermost; 'tp-cp-ep-pp-dp' puts it just inside dp)."""
    pp = args.pipeline_model_parallel_size
    per_stage = args.world_size // pp
    if not getattr(args, "use_tp_pp_dp_mapping", False):
        return stage * per_stage + (per_stage - 1 if last else 0)
    inner = args.tensor_model_parallel_size * args.context_parallel_size
    if not last:
        return stage * inner
    # The last tp-cp position of the last data-parallel group.
    return (per_stage // inner - 1) * inner * pp + stage * inner + inner - 1


def initialize_parallel(args, rank):
    """torch's fake process group at RANK (Megatron-LM's --fake-process-group,
    training/initialize.py) and Megatron-LM's initialize_model_parallel with the arguments
    training/initialize.py passes, without gloo groups."""
    import torch
    from megatron.core import parallel_state as mpu
    from megatron.training import initialize
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if torch.distributed.is_initialized():
        mpu.destroy_model_parallel()
        torch.distributed.destroy_process_group()
    args.rank = rank
    torch.distributed.init_process_group(backend="fake", store=FakeStore(), rank=rank,
                                         world_size=args.world_size)
    mpu.initialize_model_parallel(
        args.tensor_model_parallel_size,
        args.pipeline_model_parallel_size,
        args.virtual_pipeline_model_parallel_size,
        pipeline_model_parallel_comm_backend=args.pipeline_model_parallel_comm_backend,
        use_sharp=args.use_sharp,
        gtp_remat_size=args.gtp_weight_remat_size,
        expert_gtp_remat_size=args.expert_gtp_weight_remat_size,
        context_parallel_size=args.context_parallel_size,
        hierarchical_context_parallel_sizes=args.hierarchical_context_parallel_sizes,
        hybrid_context_parallel=args.hybrid_context_parallel,
        expert_model_parallel_size=args.expert_model_parallel_size,
        num_distributed_optimizer_instances=args.num_distributed_optimizer_instances,
        expert_tensor_parallel_size=args.expert_tensor_parallel_size,
        distributed_timeout_minutes=args.distributed_timeout_minutes,
        nccl_communicator_config_path=args.nccl_communicator_config_path,
        order='tp-cp-ep-dp-pp' if not args.use_tp_pp_dp_mapping else 'tp-cp-ep-pp-dp',
        get_embedding_ranks=initialize.get_embedding_ranks
        if hasattr(initialize, "get_embedding_ranks") else None,
        get_position_embedding_ranks=initialize.get_position_embedding_ranks
        if hasattr(initialize, "get_position_embedding_ranks") else None,
        create_gloo_process_groups=False,
        high_priority_stream_groups=args.high_priority_stream_groups,
        sharp_enabled_group=args.sharp_enabled_group,
    )
    return mpu.get_pipeline_model_parallel_rank()


class Wrapping:
    """What get_model handed to wrap_model_chunks_with_ddp, recorded on the way through, so
    that DDP can be built once more with another layout."""

    def __init__(self):
        self.calls = []

    def install(self, training):
        import copy

        original = training.wrap_model_chunks_with_ddp

        def spy(model_chunks, config, ddp_config, **kwargs):
            record = {"config": config, "ddp_config": copy.deepcopy(ddp_config),
                      "kwargs": dict(kwargs)}
            wrapped = original(model_chunks, config, ddp_config, **kwargs)
            record["ddp_config_after"] = ddp_config
            self.calls.append(record)
            return wrapped

        training.wrap_model_chunks_with_ddp = spy


def model_provider_for(args):
    """model_provider with the builder pretrain_gpt.py (gpt_builder) or pretrain_hybrid.py
    (hybrid_builder) passes it; with --hf-config, Megatron-Bridge's provider."""
    from functools import partial

    if _BRIDGE is not None:
        return _BRIDGE

    from model_provider import model_provider

    if getattr(args, "hybrid_layer_pattern", None):
        from hybrid_builders import hybrid_builder
        return partial(model_provider, hybrid_builder)
    from gpt_builders import gpt_builder
    return partial(model_provider, gpt_builder)


def _is_cuda(device):
    import torch
    if isinstance(device, str):
        return device.startswith("cuda")
    return isinstance(device, torch.device) and device.type == "cuda"


def cuda_to_meta():
    """A torch function mode in which a tensor made with an explicit CUDA device
    (`device="cuda"`, `torch.device("cuda")`) is made on the meta device instead: the same
    rule as torch.cuda.current_device() answering meta, for code that names the device."""
    import torch
    from torch.overrides import TorchFunctionMode

    class CudaToMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if _is_cuda(kwargs.get("device")):
                kwargs["device"] = torch.device("meta")
            return func(*args, **kwargs)

    return CudaToMeta()


class Stage:
    """One pipeline stage as get_model built it: its DDP-wrapped chunks, while its process
    groups are the current ones."""

    def __init__(self, stage, chunks, record, rank):
        self.stage = stage
        self.chunks = chunks
        self.record = record
        self.rank = rank  # the global rank it was built at

    def inner(self, c):
        """The model chunk itself (GPTModel or HybridModel), inside DDP and Float16Module."""
        module = self.chunks[c].module
        while hasattr(module, "module"):
            module = module.module
        return module

    def rewrap(self, c, full_param_layout):
        """DDP built once more on chunk C, as get_model built it, with FULL_PARAM_LAYOUT."""
        import copy

        import torch
        from megatron.core.distributed import DistributedDataParallel

        record = self.record
        disable = record["kwargs"].get("disable_bucketing_per_chunk") or \
            [False] * len(self.chunks)
        with torch.device("meta"), cuda_to_meta():
            return DistributedDataParallel(
                config=record["config"], ddp_config=copy.deepcopy(record["ddp_config_after"]),
                module=self.chunks[c].module, disable_bucketing=disable[c],
                full_param_layout=full_param_layout)


def refusal(e):
    """ArgumentsRefused for Megatron-LM's exception E, with the arguments its reason names."""
    return ArgumentsRefused(f"{type(e).__name__}: {e}", refusal_reasons.megatron_subjects(e))


_WRAPPING = None
_BRIDGE = None


def use_bridge(build):
    """Build chunks with BUILD (bridge_model_provider's) instead of the upstream builders."""
    global _BRIDGE
    _BRIDGE = build


def build_job(args, last=False):
    """Each pipeline stage in turn (a generator of Stage): every virtual chunk, wrapped in DDP
    by Megatron-LM's get_model at the stage's first rank (LAST: its last). A builder's
    assertion (a split or a model Megatron-LM refuses) raises ArgumentsRefused."""
    import torch
    from megatron.core.enums import ModelType
    from megatron.training import training

    global _WRAPPING
    if _WRAPPING is None:
        _WRAPPING = Wrapping()
        _WRAPPING.install(training)
    wrapping = _WRAPPING
    for stage in range(args.pipeline_model_parallel_size):
        rank = stage_rank(args, stage, last)
        pp_rank = initialize_parallel(args, rank)
        assert pp_rank == stage, f"rank {rank} is on stage {pp_rank}"
        try:
            with torch.device("meta"), cuda_to_meta():
                chunks = training.get_model(model_provider_for(args),
                                            ModelType.encoder_or_decoder, wrap_with_ddp=True)
        except (AssertionError, ValueError, NotImplementedError) as e:
            # NotImplementedError: a Megatron-Bridge provider refusing the split (Gemma 4's
            # dense provider builds one pipeline stage only).
            if os.environ.get("REAL_MODEL_DEBUG"):
                import traceback
                traceback.print_exc()
            raise refusal(e) from None
        yield Stage(stage, chunks, wrapping.calls[-1], rank)
