"""A model from a Hugging Face config.json through Megatron-Bridge's own code: the bridge its
AutoBridge picks for the config's architecture, that bridge's provider (no weights), and the
provider's own provide() building each chunk inside Megatron-LM's get_model. The launch line
decides the split, the precision, the vocab padding, and the two model choices `job` reads
from the line (docs/exactness.md, With --hf-config).
"""
from megatron_runtime import OutOfReach


def bridge_provider(hf_config_path):
    """Megatron-Bridge's own provider for a Hugging Face config.json: the bridge its
    AutoBridge picks for the config's architecture, from the config alone (no weights)."""
    import json

    # Megatron-Bridge registers its own config classes for architectures transformers does not
    # ship (Step-3.5's step3p5) when its models are imported.
    import megatron.bridge.models  # noqa: F401
    from transformers import CONFIG_MAPPING

    with open(hf_config_path) as f:
        data = json.load(f)
    if data.get("model_type") not in CONFIG_MAPPING:
        raise OutOfReach(f"transformers knows no model_type {data.get('model_type')!r}")
    config = CONFIG_MAPPING[data["model_type"]].from_dict(data)
    from megatron.bridge.models.conversion.auto_bridge import AutoBridge

    try:
        bridge = AutoBridge.from_hf_config(config)
    except ValueError:
        names = ", ".join(config.architectures or [data.get("model_type", "?")])
        raise OutOfReach(f"Megatron-Bridge maps no bridge for {names}; judge it through its "
                         "launch line (the model's sizes as arguments)") from None
    try:
        return bridge.to_megatron_provider(load_weights=False)
    except AttributeError as e:
        if getattr(e, "obj", None) is not config:
            raise
        raise OutOfReach(f"Megatron-Bridge's bridge reads the config field {e.name!r}, which "
                         f"this config and transformers' {type(config).__name__} do not "
                         "define") from None


# What the launch line decides for a Bridge-built model: how it is split and its precision
# (TransformerConfig fields, as core_transformer_config_from_args derives them).
LINE_FIELDS = (
    "tensor_model_parallel_size", "pipeline_model_parallel_size",
    "virtual_pipeline_model_parallel_size", "context_parallel_size",
    "expert_model_parallel_size", "expert_tensor_parallel_size", "sequence_parallel",
    "fp16", "bf16", "params_dtype", "pipeline_dtype", "gradient_accumulation_fusion",
    "num_layers_in_first_pipeline_stage", "num_layers_in_last_pipeline_stage",
    "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split",
    "pipeline_model_parallel_layout", "calculate_per_token_loss",
)
# Model choices that the launch line makes for a Bridge-built model too (`job` reads them
# from the line with --hf-config as without): MTP layers and grouped experts. Bridge's
# providers have their own defaults for both (grouped GEMM on for its MoE models).
LINE_MODEL_FIELDS = ("mtp_num_layers", "moe_grouped_gemm")


def bridge_model_provider(args, provider, line):
    """A model_provider_func for get_model that builds each chunk with the provider's own
    provide(), after the line's split, precision and vocab padding are set on it."""
    from megatron.training.arguments import core_transformer_config_from_args

    config = core_transformer_config_from_args(args)
    for field in LINE_FIELDS:
        if hasattr(config, field):
            setattr(provider, field, getattr(config, field))
    for field in LINE_MODEL_FIELDS:
        setattr(provider, field, getattr(config, field))
    provider.make_vocab_size_divisible_by = args.make_vocab_size_divisible_by
    provider.should_pad_vocab = bool(getattr(args, "pad_vocab_size", True))
    provider.finalize()

    def build(pre_process=True, post_process=True, vp_stage=None, config=None,
              pg_collection=None):
        # provide_distributed_model hands the provider get_model's process groups so.
        provider._pg_collection = pg_collection
        model = provider.provide(pre_process=pre_process, post_process=post_process,
                                 vp_stage=vp_stage)
        # A multimodal model's language model alone: `job` plans the decoder, the vision
        # or audio tower left out (docs/exactness.md).
        language_model = getattr(model, "language_model", None)
        return model if language_model is None else language_model
    return build


def bridge_line(line, provider):
    """The line with what Megatron-LM's arguments require of the model (--num-layers,
    --hidden-size, --num-attention-heads, --vocab-size, --num-experts, --disable-bias-linear)
    from the provider, where absent: they let validate_args run; the model itself comes from
    the provider."""
    line = list(line)
    length = getattr(provider, "seq_length", None) or 4096
    sizes = {"--num-layers": provider.num_layers, "--hidden-size": provider.hidden_size,
             "--num-attention-heads": provider.num_attention_heads,
             "--vocab-size": provider.vocab_size, "--seq-length": length,
             "--max-position-embeddings": length,
             "--kv-channels": getattr(provider, "kv_channels", None)}
    for flag, value in sizes.items():
        if flag not in line and value is not None:
            line += [flag, str(value)]
    if getattr(provider, "num_query_groups", None) and \
            provider.num_query_groups != provider.num_attention_heads and \
            "--num-query-groups" not in line:
        line += ["--group-query-attention", "--num-query-groups", str(provider.num_query_groups)]
    experts = getattr(provider, "num_moe_experts", None)
    if experts and "--num-experts" not in line:
        line += ["--num-experts", str(experts)]
    if not getattr(provider, "add_bias_linear", True) and "--disable-bias-linear" not in line:
        line.append("--disable-bias-linear")
    return line
