"""A model from a Hugging Face config.json through Megatron-Bridge's own code: the bridge its
AutoBridge picks for the config's architecture, that bridge's provider (no weights), and the
provider's own provide() building each chunk inside Megatron-LM's get_model. The launch line
decides the split, the precision, the vocab padding, and the two model choices `job` reads
from the line; Megatron-LM validates the line with the model's arguments as the provider has
them (docs/exactness.md, With --hf-config).
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
    provider.seq_length = args.seq_length
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


# The model's arguments: the fields that give the params their shapes and the positions their
# kind, which `job` reads from the config and not from the line, under the names Megatron-LM's
# arguments and Bridge's providers share. The rest (fusions, dispatcher, recompute) is the line's.
MODEL_FIELDS = (
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "kv_channels",
    "vocab_size", "normalization", "add_bias_linear", "add_qkv_bias", "qk_layernorm",
    "layernorm_zero_centered_gamma", "multi_latent_attention", "q_lora_rank", "kv_lora_rank",
    "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim", "moe_ffn_hidden_size", "moe_layer_freq",
    "moe_router_topk", "moe_shared_expert_intermediate_size", "moe_shared_expert_gate",
    "moe_router_enable_expert_bias", "moe_router_num_groups", "moe_router_group_topk",
    "moe_router_score_function", "position_embedding_type", "rotary_base", "rotary_percent",
    "rope_type", "mrope_section",
)


def model_arguments(provider):
    """What read_arguments sets on the parsed line before Megatron-LM validates it: the
    model's arguments as the provider has them, where the line gives none, so that
    validate_args sees the model that is built (rope positions, MLA, the sizes). Names that
    differ are those core_transformer_config_from_args maps (arguments.py's --num-experts,
    --swiglu, --group-query-attention, --untie-embeddings-and-output-weights). The line's
    --seq-length is the model's sequence (Megatron-Bridge requires the model's seq_length to be
    the data's: training/config.py:1644), and the positions cover it."""
    derived = {name: getattr(provider, name) for name in MODEL_FIELDS if hasattr(provider, name)}
    derived["num_experts"] = getattr(provider, "num_moe_experts", None)
    activation = getattr(getattr(provider, "activation_func", None), "__name__", "")
    derived["swiglu"] = bool(getattr(provider, "gated_linear_unit", False)) and activation == "silu"
    derived["squared_relu"] = activation == "squared_relu"
    groups = getattr(provider, "num_query_groups", None)
    if groups and groups != provider.num_attention_heads:
        derived["group_query_attention"] = True
        derived["num_query_groups"] = groups
    derived["untie_embeddings_and_output_weights"] = \
        not getattr(provider, "share_embeddings_and_output_weights", True)

    def complete(args, given):
        for name, value in derived.items():
            if name not in given and hasattr(args, name) and value is not None:
                setattr(args, name, value)
        if "seq_length" not in given and "encoder_seq_length" not in given:
            args.seq_length = getattr(provider, "seq_length", None) or 4096
        if "max_position_embeddings" not in given:
            args.max_position_embeddings = args.seq_length or args.encoder_seq_length
    return complete
