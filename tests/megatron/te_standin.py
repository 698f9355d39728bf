"""A stand-in for the Transformer Engine classes Megatron-LM's TE layers derive from, at the TE
revision Megatron-LM d98e8a64 pins (pyproject.toml: transformer-engine 2.17.1+4329ff84).

TE's modules need a CUDA device, so they cannot be built on the CPU. Megatron-LM's own wrappers
(megatron/core/extensions/transformer_engine.py: TELinear, TELayerNormColumnParallelLinear,
TEColumnParallelLinear, TERowParallelLinear, TENorm, TEDotProductAttention, TEGroupedLinear)
run unchanged on top of this stand-in; only the TE base classes below are replaced, and each
registers exactly the params TE registers, in TE's order, with TE's names, shapes and dtypes.
Every line that decides a param cites TE's source at 4329ff84 (file:line). Nothing else is
stood in: a TE name not defined here does not import (ImportError), so Megatron-LM takes the
path it takes without that TE feature.

Params are made on the meta device (TE would put them on `device`, default "cuda"), and never
initialized (TE defers initialization on meta, base.py reset_parameters(defer_init)).
"""
import sys
import types

import torch

VERSION = "2.17.1+4329ff84"  # Megatron-LM pyproject.toml, [[tool.uv.dependency-metadata]]
_META = torch.device("meta")
GemmParallelModes = ("row", "column", None)  # transformer_engine/pytorch/constants.py


def _divide(numerator, denominator):
    # transformer_engine/pytorch/utils.py divide(): asserts exact division.
    assert numerator % denominator == 0, f"{numerator} is not divisible by {denominator}"
    return numerator // denominator


def _tp_size(tp_group, tp_size):
    # linear.py:1507-1512: tp_size from the group when one is given, else the argument.
    if tp_group is None:
        return tp_size
    return torch.distributed.get_world_size(tp_group)


def _empty(*shape, dtype):
    return torch.empty(*shape, device=_META, dtype=dtype)


class TransformerEngineBaseModule(torch.nn.Module):
    """module/base.py TransformerEngineBaseModule: only what construction touches."""

    def __init__(self, name=None):
        super().__init__()
        self.name = name
        self.fp8 = False
        self.fp8_calibration = False
        self.fp8_meta = {"recipe": None, "fp8_checkpoint": False}
        self.primary_weights_in_fp8 = False
        self.tp_group = None
        self.tp_size = 1

    def register_parameter(self, name, param, **kwargs):
        # base.py register_parameter(): records init_fn/get_rng_state_tracker/fp8_meta_index
        # for deferred init, then torch.nn.Module.register_parameter.
        super().register_parameter(name, param)

    def set_tensor_parallel_group(self, tp_group):
        self.tp_group = tp_group

    def set_nccl_overlap_warning_if_tp(self):
        pass

    def init_fp8_metadata(self, num_gemms=1):
        pass

    def reset_parameters(self, defer_init=False):
        pass

    def fast_setattr(self, name, value):
        self.__dict__[name] = value


class Linear(TransformerEngineBaseModule):
    """module/linear.py Linear (4329ff84)."""

    def __init__(self, in_features, out_features, sequence_parallel=False,
                 fuse_wgrad_accumulation=False, tp_group=None, tp_size=1,
                 get_rng_state_tracker=None, rng_tracker_name=None, init_method=None, bias=True,
                 return_bias=False, params_dtype=None, parallel_mode=None, parameters_split=None,
                 device="cuda", ub_overlap_ag=False, ub_overlap_rs=False,
                 ub_overlap_rs_dgrad=False, ub_bulk_dgrad=False, ub_bulk_wgrad=False,
                 ub_name=None, delay_wgrad_compute=False, symmetric_ar_type=None,
                 save_original_input=False, name=None):
        super().__init__(name)
        params_dtype = torch.get_default_dtype() if params_dtype is None else params_dtype  # :1491
        self.in_features, self.out_features = in_features, out_features  # :1492-1493
        self.use_bias = bias  # :1495
        self.return_bias = return_bias
        self.apply_bias = bias and not return_bias
        self.tp_size = _tp_size(tp_group, tp_size)  # :1507-1512
        self.tp_group = tp_group
        assert parallel_mode in GemmParallelModes  # :1516-1518
        self.parallel_mode = parallel_mode
        if parallel_mode == "column":  # :1521-1524
            self.out_features = _divide(self.out_features, self.tp_size)
        elif parallel_mode == "row":
            self.in_features = _divide(self.in_features, self.tp_size)
        self.sequence_parallel = self.tp_size > 1 and sequence_parallel  # :1526
        if parameters_split is not None:
            raise NotImplementedError("the TE stand-in builds parameters_split=None only")
        weight = _empty(self.out_features, self.in_features, dtype=params_dtype)  # :1596-1601
        self.weight_names, self.bias_names = ["weight"], ["bias"]  # :1614-1617
        self.register_parameter("weight", torch.nn.Parameter(weight))  # :1673-1679
        if self.use_bias:  # :1682-1693
            self.register_parameter(
                "bias", torch.nn.Parameter(_empty(self.out_features, dtype=params_dtype)))
        else:  # :1694-1696: an empty tensor, not a param
            self.bias = torch.Tensor().to(dtype=params_dtype, device=_META)
        self.gemm_bias_unfused_add = parallel_mode == "row" and self.apply_bias  # :1705-1708


class LayerNormLinear(TransformerEngineBaseModule):
    """module/layernorm_linear.py LayerNormLinear (4329ff84): the norm's params first."""

    def __init__(self, in_features, out_features, eps=1e-5, sequence_parallel=False,
                 fuse_wgrad_accumulation=False, tp_group=None, tp_size=1,
                 get_rng_state_tracker=None, rng_tracker_name=None, init_method=None, bias=True,
                 normalization="LayerNorm", return_bias=False, params_dtype=None,
                 parallel_mode=None, return_layernorm_output=False,
                 return_layernorm_output_gathered=False, parameters_split=None,
                 zero_centered_gamma=False, device="cuda", name=None, **kwargs):
        super().__init__(name)
        params_dtype = torch.get_default_dtype() if params_dtype is None else params_dtype
        self.in_features, self.out_features = in_features, out_features
        self.use_bias = bias
        self.return_bias = return_bias
        self.apply_bias = bias and not return_bias
        assert normalization in ["LayerNorm", "RMSNorm"]  # :1293
        self.normalization = normalization
        self.zero_centered_gamma = zero_centered_gamma
        self.return_layernorm_output = return_layernorm_output
        self.tp_size = _tp_size(tp_group, tp_size)
        self.tp_group = tp_group
        assert parallel_mode in GemmParallelModes
        self.parallel_mode = parallel_mode
        if parallel_mode == "column":
            self.out_features = _divide(self.out_features, self.tp_size)
        elif parallel_mode == "row":
            self.in_features = _divide(self.in_features, self.tp_size)
        self.sequence_parallel = self.tp_size > 1 and sequence_parallel
        if parameters_split is not None:
            raise NotImplementedError("the TE stand-in builds parameters_split=None only")
        self.eps = eps
        # :1398-1404 layer_norm_weight [in_features]; :1405-1414 layer_norm_bias unless RMSNorm.
        self.register_parameter("layer_norm_weight",
                                torch.nn.Parameter(_empty(self.in_features, dtype=params_dtype)))
        if normalization != "RMSNorm":
            self.register_parameter(
                "layer_norm_bias", torch.nn.Parameter(_empty(self.in_features, dtype=params_dtype)))
        else:
            self.layer_norm_bias = None
        # :1420-1432 weight [out, in], bias [out]; :1497-1520 registered weight then bias.
        self.weight_names, self.bias_names = ["weight"], ["bias"]
        self.register_parameter(
            "weight", torch.nn.Parameter(_empty(self.out_features, self.in_features,
                                                dtype=params_dtype)))
        if self.use_bias:
            self.register_parameter(
                "bias", torch.nn.Parameter(_empty(self.out_features, dtype=params_dtype)))
        else:
            self.bias = torch.Tensor().to(dtype=params_dtype, device=_META)


class GroupedLinear(TransformerEngineBaseModule):
    """module/grouped_linear.py GroupedLinear (4329ff84): weight{i} and bias{i} in turn."""

    def __init__(self, num_gemms, in_features, out_features, sequence_parallel=False,
                 fuse_wgrad_accumulation=False, tp_group=None, tp_size=1,
                 get_rng_state_tracker=None, rng_tracker_name=None, init_method=None, bias=True,
                 return_bias=False, params_dtype=None, parallel_mode=None, device="cuda",
                 ub_overlap_rs=False, ub_overlap_ag=False, ub_name=None,
                 delay_wgrad_compute=False, save_original_input=False,
                 single_grouped_weight=False, single_grouped_bias=False, name=None):
        super().__init__(name)
        self.params_dtype = torch.get_default_dtype() if params_dtype is None else params_dtype
        self.num_gemms = num_gemms
        self.in_features, self.out_features = in_features, out_features
        self.use_bias = bias
        self.return_bias = return_bias
        self.apply_bias = bias and not return_bias
        self.tp_size = _tp_size(tp_group, tp_size)
        self.tp_group = tp_group
        self.parallel_mode = parallel_mode
        if parallel_mode == "column":  # :1339-1342
            self.out_features = _divide(self.out_features, self.tp_size)
        elif parallel_mode == "row":
            self.in_features = _divide(self.in_features, self.tp_size)
        self.sequence_parallel = self.tp_size > 1 and sequence_parallel
        if single_grouped_weight or single_grouped_bias:
            raise NotImplementedError(
                "single grouped weights are TE GroupedTensors; the stand-in builds per-GEMM params")
        for i in range(num_gemms):  # :1346-1378
            self.register_parameter(f"weight{i}", torch.nn.Parameter(
                _empty(self.out_features, self.in_features, dtype=self.params_dtype)))
            if self.use_bias:
                self.register_parameter(f"bias{i}", torch.nn.Parameter(
                    _empty(self.out_features, dtype=self.params_dtype)))
            else:
                setattr(self, f"bias{i}", torch.Tensor().to(dtype=self.params_dtype, device=_META))


class _Norm(torch.nn.Module):
    def __init__(self, normalized_shape=None, eps=1e-5, sequence_parallel=None,
                 params_dtype=None, zero_centered_gamma=False, hidden_size=None, **kwargs):
        super().__init__()
        shape = normalized_shape if normalized_shape is not None else hidden_size
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        dtype = params_dtype or kwargs.get("dtype") or torch.get_default_dtype()
        self.sequence_parallel = sequence_parallel
        self.eps = eps
        self.zero_centered_gamma = zero_centered_gamma
        self.register_parameter("weight", torch.nn.Parameter(_empty(*shape, dtype=dtype)))
        if self._has_bias:
            self.register_parameter("bias", torch.nn.Parameter(_empty(*shape, dtype=dtype)))


class LayerNorm(_Norm):
    """module/layernorm.py LayerNorm over ops/basic/layer_norm.py:97-112: weight, bias."""
    _has_bias = True


class RMSNorm(_Norm):
    """module/rmsnorm.py RMSNorm over ops/basic/rmsnorm.py:96-103: weight."""
    _has_bias = False


class DotProductAttention(TransformerEngineBaseModule):
    """attention/dot_product_attention/dot_product_attention.py DotProductAttention: a param
    only for softmax_type "learnable" (:488-493): softmax_offset [heads / tp], float32."""

    def __init__(self, num_attention_heads, kv_channels, num_gqa_groups=None,
                 attention_dropout=0.0, qkv_format="sbhd", attn_mask_type="causal",
                 window_size=None, sequence_parallel=False, tp_size=1,
                 get_rng_state_tracker=None, tp_group=None, layer_number=None,
                 attention_type="self", cp_group=None, cp_global_ranks=None, cp_stream=None,
                 cp_comm_type="p2p", softmax_scale=None, softmax_type="vanilla",
                 return_max_logit=False, **kwargs):
        super().__init__()
        self.tp_size = _tp_size(tp_group, tp_size)  # :409-414
        self.num_attention_heads = num_attention_heads
        self.softmax_type = softmax_type
        if softmax_type == "vanilla":  # :482-483
            self.softmax_offset = None
        if softmax_type == "off-by-one":  # :484-487: a tensor, not a param
            self.softmax_offset = torch.zeros(num_attention_heads // self.tp_size, device=_META)
        if softmax_type == "learnable":
            self.register_parameter("softmax_offset", torch.nn.Parameter(
                torch.zeros(num_attention_heads // self.tp_size, device=_META)))


class QuantizedTensor(torch.Tensor):
    """pytorch/tensor: TE's quantized tensor base; no param the stand-in makes is one."""


class _OpsSequential(torch.nn.Module):
    """pytorch/ops Sequential: Megatron-Bridge names it in annotations of its fused LoRA
    layers (evaluated when the class is defined); TE's fused ops are not stood in."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("transformer_engine.pytorch.ops: TE's fused ops (TE stand-in)")


class _Recipe:
    def __init__(self, *args, **kwargs):
        self.__dict__.update(kwargs)


class FP8GlobalStateManager:
    """pytorch/fp8.py: no FP8 on the CPU."""

    @staticmethod
    def is_fp8_enabled():
        return False

    @staticmethod
    def with_fp8_parameters():
        return False

    @staticmethod
    def is_first_fp8_module():
        return False


def _no_context(*args, **kwargs):
    import contextlib
    return contextlib.nullcontext()


class CudaRNGStatesTracker:
    """pytorch/distributed.py CudaRNGStatesTracker: Megatron-LM's TECudaRNGStatesTracker
    derives from it; its state is CUDA RNG state, so fork() does nothing here."""

    def __init__(self):
        self.states_ = {}

    def reset(self):
        self.states_ = {}

    def get_states(self):
        return self.states_

    def set_states(self, states):
        self.states_ = states

    def add(self, name, seed):
        self.states_[name] = seed

    def fork(self, name="model-parallel-rng"):
        return _no_context()


def _kernel(name):
    """A TE kernel Megatron-LM imports by name and calls only in forward or backward."""

    def unavailable(*args, **kwargs):
        raise NotImplementedError(f"transformer_engine {name}: a CUDA kernel (TE stand-in)")

    unavailable.__name__ = name
    return unavailable


def _module(name, package=False, **attrs):
    m = types.ModuleType(name)
    if package:
        m.__path__ = []
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def install():
    """Put the stand-in in sys.modules as `transformer_engine` (before Megatron-LM imports)."""
    te = _module("transformer_engine", package=True, __version__=VERSION)
    recipe = _module("transformer_engine.common.recipe", DelayedScaling=_Recipe,
                     Format=types.SimpleNamespace(E4M3="E4M3", HYBRID="HYBRID"),
                     MXFP8BlockScaling=_Recipe, Float8CurrentScaling=_Recipe,
                     Float8BlockScaling=_Recipe, NVFP4BlockScaling=_Recipe)
    common = _module("transformer_engine.common", package=True, recipe=recipe)
    fp8 = _module("transformer_engine.pytorch.fp8", FP8GlobalStateManager=FP8GlobalStateManager,
                  fp8_autocast=_no_context, fp8_model_init=_no_context)
    distributed = _module("transformer_engine.pytorch.distributed",
                          CudaRNGStatesTracker=CudaRNGStatesTracker,
                          activation_recompute_forward=_no_context)
    base = _module("transformer_engine.pytorch.module.base",
                   TransformerEngineBaseModule=TransformerEngineBaseModule)
    module = _module("transformer_engine.pytorch.module", package=True, base=base)
    pytorch = _module("transformer_engine.pytorch", package=True, Linear=Linear,
                      LayerNormLinear=LayerNormLinear, GroupedLinear=GroupedLinear,
                      LayerNorm=LayerNorm, RMSNorm=RMSNorm,
                      DotProductAttention=DotProductAttention, fp8=fp8,
                      distributed=distributed, module=module, fp8_autocast=_no_context,
                      fp8_model_init=_no_context, autocast=_no_context,
                      quantized_model_init=_no_context)
    # Imported unconditionally by megatron/core/extensions/transformer_engine.py for TE >= 2.7.
    pytorch.router = _module("transformer_engine.pytorch.router", **{
        n: _kernel(n) for n in ("fused_compute_score_for_moe_aux_loss", "fused_moe_aux_loss",
                                "fused_topk_with_score_function")})
    # Rotary-embedding kernels (forward only), imported by name for TE >= 2.3.
    rope = _module("transformer_engine.pytorch.attention.rope", **{
        n: _kernel(n) for n in ("apply_rotary_pos_emb", "apply_fused_qkv_rotary_pos_emb")})
    pytorch.attention = _module("transformer_engine.pytorch.attention", package=True, rope=rope)
    # Fused MoE permutation kernels (forward only); TransformerConfig requires them to exist
    # for moe_permute_fusion, which Megatron-Bridge's MoE providers turn on.
    pytorch.permutation = _module("transformer_engine.pytorch.permutation", **{
        n: _kernel(n) for n in ("moe_permute", "moe_permute_with_probs", "moe_sort_chunks_by_index",
                                "moe_sort_chunks_by_index_with_probs", "moe_unpermute",
                                "moe_permute_and_pad_with_probs")})
    pytorch.ops = _module("transformer_engine.pytorch.ops", package=True,
                          Sequential=_OpsSequential)
    pytorch.tensor = _module("transformer_engine.pytorch.tensor", package=True,
                             QuantizedTensor=QuantizedTensor)
    te.pytorch = pytorch
    te.common = common
    return te
