"""Megatron-LM's own pipeline split, run from a checkout without torch.

Reads the functions that decide what each (pipeline rank, virtual stage) builds from a
Megatron-LM checkout (a work tree, or a bare git directory such as the one `fetch` makes),
takes them out of their modules with `ast`, and runs them with the parts they need from
torch and torch.distributed stood in for by plain Python. Nothing of Megatron-LM is copied
into this project. Used:

- megatron/training/arguments.py, validate_args: the pipeline block (at most one of the
  virtual-stage arguments and the layout, the virtual pipeline size, divisibility, pp > 1 or
  > 2 with interleaving);
- megatron/core/transformer/transformer_config.py, TransformerConfig.__post_init__: the
  pipeline checks (uneven stages, account-for flags, the layout and validate_layer_layout);
- megatron/training/models/dist_utils.py, build_virtual_pipeline_stages: which chunks a rank
  builds and their pre_process / post_process;
- transformer_block.py get_num_layers_to_build and TransformerBlock
  .has_final_layernorm_in_this_stage; transformer_layer.py get_transformer_layer_offset;
  pipeline_parallel_layer_layout.py PipelineParallelLayerLayout; multi_token_prediction.py
  mtp_on_this_rank, get_mtp_num_layers_to_build, get_mtp_layer_offset; gpt_layer_specs.py
  get_gpt_mtp_block_spec_for_backend; parallel_state.py is_pipeline_last_stage;
  pipeline_parallel/utils.py is_vp_first_stage, is_vp_last_stage, is_pp_first_stage,
  is_pp_last_stage.

The glue follows GPTModel's constructor (megatron/core/models/gpt/gpt_model.py): the chunk
has the embedding when it is pre_process or holds MTP layers (mtp_process), the output layer
when it is post_process, and the MTP block asserts it sits on a rank's last virtual stage.
"""
import __future__
import argparse
import ast
import copy
import enum
import functools
import logging
import re
import sys
import textwrap
import types
import typing

from megatron_checkout import checkout_commit, read_source

FILES = {
    "arguments": "megatron/training/arguments.py",
    "config": "megatron/core/transformer/transformer_config.py",
    "dist_utils": "megatron/training/models/dist_utils.py",
    "block": "megatron/core/transformer/transformer_block.py",
    "layer": "megatron/core/transformer/transformer_layer.py",
    "layout": "megatron/core/transformer/pipeline_parallel_layer_layout.py",
    "mtp": "megatron/core/transformer/multi_token_prediction.py",
    "specs": "megatron/core/models/gpt/gpt_layer_specs.py",
    "enums": "megatron/core/transformer/enums.py",
    "pp_utils": "megatron/core/pipeline_parallel/utils.py",
    "parallel_state": "megatron/core/parallel_state.py",
}

# Megatron-LM's refusals: what its asserts and checks raise, and what its code raises on
# arguments it does not check (an empty layout is an IndexError, uneven stages with virtual
# stages and no middle stage a ZeroDivisionError). Anything else (a NameError, an
# AttributeError) is this harness failing, and is not caught.
REFUSALS = (AssertionError, ValueError, ZeroDivisionError, NotImplementedError, IndexError)


def find_function(tree, path):
    """The FunctionDef or ClassDef at PATH ("name" or "Class.method") in TREE."""
    nodes = tree.body
    found = None
    for name in path.split("."):
        found = next((n for n in nodes if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                      and n.name == name), None)
        if found is None:
            raise SystemExit(f"Megatron-LM's source has no {path}: this harness needs updating")
        nodes = found.body
    return found


def definition(source, path, rename=None):
    """The source of the top-level function or class (or Class.method) at PATH, without its
    own decorators."""
    node = copy.deepcopy(find_function(ast.parse(source), path))
    node.decorator_list = []
    if rename:
        node.name = rename
    return ast.unparse(node)


def statements(source, function, first, last, name):
    """A function `name(args)` made of the statements of FUNCTION's body from the first whose
    text holds FIRST to the next whose text holds LAST."""
    body = find_function(ast.parse(source), function).body
    texts = [ast.unparse(s) for s in body]
    start = next((i for i, t in enumerate(texts) if first in t), None)
    end = next((i for i in range(start or 0, len(texts)) if last in texts[i]), None)
    if start is None or end is None:
        raise SystemExit(f"{function}: the statements from '{first}' to '{last}' are gone: "
                         "this harness needs updating")
    parameter = find_function(ast.parse(source), function).args.args[0].arg
    code = "\n".join(texts[start:end + 1])
    return f"def {name}({parameter}):\n" + textwrap.indent(code, "    ")


class State:
    """What parallel_state and the pipeline process group report on the rank being built."""
    pp = 1
    pp_rank = 0
    vpp = None


class PipelineGroup:
    def size(self):
        return State.pp


def run(code, namespace):
    exec(compile(code, "<megatron>", "exec", flags=__future__.annotations.compiler_flag,
                 dont_inherit=True), namespace)


class Stub:
    """Stands in for a torch module, spec or submodules object: keeps what it is given."""

    def __init__(self, *args, **kwargs):
        self.args = args
        self.__dict__.update(kwargs)


class Megatron:
    """Megatron-LM's pipeline functions, loaded from CHECKOUT."""

    def __init__(self, checkout):
        src = {key: read_source(checkout, path) for key, path in FILES.items()}
        self.commit = checkout_commit(checkout)
        ns = {"re": re, "copy": copy, "lru_cache": functools.lru_cache, "logging": logging,
              "logger": logging.getLogger("megatron"), "safe_get_rank": lambda: 0,
              "print_rank_0": lambda *a, **k: None, "warn_rank_0": lambda *a, **k: None,
              "print": lambda *a, **k: None}
        ns.update({name: getattr(typing, name) for name in ("Optional", "List", "Union",
                                                             "Callable", "Tuple", "Dict")})
        run(src["enums"], ns)

        # parallel_state: its own is_pipeline_last_stage over the rank being built.
        ps = {"get_pipeline_model_parallel_rank": lambda: State.pp_rank,
              "get_pipeline_model_parallel_world_size": lambda: State.pp,
              "get_virtual_pipeline_model_parallel_world_size": lambda: State.vpp}
        run(definition(src["parallel_state"], "is_pipeline_last_stage"), ps)
        ns["parallel_state"] = types.SimpleNamespace(**ps)

        utils = {"get_pg_rank": lambda group: State.pp_rank,
                 "get_pg_size": lambda group: group.size()}
        for name in ("is_pp_first_stage", "is_pp_last_stage", "is_vp_first_stage",
                     "is_vp_last_stage"):
            run(definition(src["pp_utils"], name), utils)
        ns.update({k: v for k, v in utils.items() if k.startswith("is_")})
        self._register_module("megatron.core.pipeline_parallel.utils", utils)

        run(definition(src["layout"], "PipelineParallelLayerLayout"), ns)
        run(definition(src["layer"], "get_transformer_layer_offset"), ns)
        run(definition(src["block"], "get_num_layers_to_build"), ns)
        run(definition(src["block"], "TransformerBlock.has_final_layernorm_in_this_stage"), ns)
        for name in ("mtp_on_this_rank", "get_mtp_layer_offset", "get_mtp_num_layers_to_build"):
            run(definition(src["mtp"], name), ns)
        ns.update({"TransformerBlockSubmodules": type("TransformerBlockSubmodules", (Stub,), {}),
                   "ModuleSpec": type("ModuleSpec", (Stub,), {}),
                   "TransformerLayer": type("TransformerLayer", (Stub,), {}),
                   "MultiTokenPredictionBlockSubmodules":
                       type("MultiTokenPredictionBlockSubmodules", (Stub,), {}),
                   "get_mtp_layer_spec_for_backend": lambda **kwargs: "mtp layer spec"})
        run(definition(src["specs"], "get_gpt_mtp_block_spec_for_backend"), ns)
        run(definition(src["dist_utils"], "build_virtual_pipeline_stages"), ns)
        run(statements(src["arguments"], "validate_args",
                       "No more than one of the following arguments", "overlap_p2p_comm",
                       "validate_pipeline_args"), ns)
        run(statements(src["config"], "TransformerConfig.__post_init__",
                       "cannot beset at the same time", "PipelineParallelLayerLayout.from_str",
                       "check_pipeline_config"), ns)
        self.ns = ns

    @staticmethod
    def _register_module(name, members):
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            sys.modules.setdefault(".".join(parts[:i]), types.ModuleType(".".join(parts[:i])))
        sys.modules[name].__dict__.update(members)

    def split(self, args):
        """What each chunk builds for Megatron-LM's arguments ARGS (a list of strings), as
        (stage, chunk, layers, mtp_layers, embedding, output, final_norm) dicts in stage
        order; raises one of REFUSALS where Megatron-LM refuses them."""
        ns = self.ns
        a = parse_arguments(args)
        ns["validate_pipeline_args"](a)
        config = types.SimpleNamespace(
            num_layers=a.num_layers, pipeline_model_parallel_size=a.pipeline_model_parallel_size,
            virtual_pipeline_model_parallel_size=a.virtual_pipeline_model_parallel_size,
            num_layers_in_first_pipeline_stage=a.decoder_first_pipeline_num_layers,
            num_layers_in_last_pipeline_stage=a.decoder_last_pipeline_num_layers,
            account_for_embedding_in_pipeline_split=a.account_for_embedding_in_pipeline_split,
            account_for_loss_in_pipeline_split=a.account_for_loss_in_pipeline_split,
            pipeline_model_parallel_layout=a.pipeline_model_parallel_layout,
            mtp_num_layers=a.mtp_num_layers, mtp_use_repeated_layer=False)
        ns["check_pipeline_config"](config)
        State.pp, State.vpp = config.pipeline_model_parallel_size, \
            config.virtual_pipeline_model_parallel_size
        chunks = []
        for rank in range(State.pp):
            State.pp_rank = rank
            built = ns["build_virtual_pipeline_stages"](
                functools.partial(self._build_chunk, config), types.SimpleNamespace(
                    pp=PipelineGroup()), State.vpp)
            for i, chunk in enumerate(built):
                chunks.append({"stage": rank, "chunk": i, **{
                    k: v for k, v in vars(chunk).items() if k != "model_type"}})
        return chunks

    def _build_chunk(self, config, pg_collection, pre_process, post_process, vp_stage=None):
        """One GPTModel chunk, as far as the split goes (gpt_model.py's constructor)."""
        ns = self.ns
        rank = State.pp_rank
        # TransformerBlock: [spec] * get_num_layers_to_build, layer numbers from the offset.
        count = len(["layer spec"] * ns["get_num_layers_to_build"](config, vp_stage, rank))
        offset = ns["get_transformer_layer_offset"](config, vp_stage, rank)
        layers = [offset + i for i in range(count)]
        block = types.SimpleNamespace(
            config=config, submodules=types.SimpleNamespace(layer_norm=True),
            post_process=post_process, post_layer_norm=True,
            layers=[types.SimpleNamespace(layer_number=n + 1) for n in layers])
        final_norm = bool(ns["has_final_layernorm_in_this_stage"](block))
        mtp_spec = None
        if config.mtp_num_layers is not None:  # megatron/training/models/gpt.py mtp_block_spec
            mtp_spec = ns["get_gpt_mtp_block_spec_for_backend"](
                config, ns["ModuleSpec"](module=ns["TransformerLayer"]), backend=None,
                vp_stage=vp_stage)
        mtp_process = mtp_spec is not None and ns["mtp_on_this_rank"](
            layout=config.pipeline_model_parallel_layout, mtp_num_layers=config.mtp_num_layers,
            ignore_virtual=False, vp_stage=vp_stage)
        mtp_layers = []
        if mtp_process:
            # MultiTokenPredictionBlock's constructor: only on a rank's last virtual stage.
            assert ns["is_vp_last_stage"](vp_stage=vp_stage,
                                          vp_size=config.virtual_pipeline_model_parallel_size)
            mtp_offset = ns["get_mtp_layer_offset"](config, vp_stage)
            mtp_layers = [mtp_offset + i for i in range(len(mtp_spec.layer_specs))]
        return types.SimpleNamespace(layers=layers, mtp_layers=mtp_layers,
                                     embedding=bool(pre_process or mtp_process),
                                     output=bool(post_process), final_norm=final_norm)


def parse_arguments(args):
    """The pipeline arguments as Megatron-LM's argparse reads them (same types, defaults and
    destinations), with the values validate_args sets before its pipeline block."""
    parser = argparse.ArgumentParser(add_help=False)
    for name in ("--num-layers", "--pipeline-model-parallel-size", "--mtp-num-layers",
                 "--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers",
                 "--num-layers-per-virtual-pipeline-stage",
                 "--num-virtual-stages-per-pipeline-rank"):
        parser.add_argument(name, type=int, default=None)
    parser.set_defaults(pipeline_model_parallel_size=1)
    parser.add_argument("--pipeline-model-parallel-layout", type=str, default=None)
    parser.add_argument("--account-for-embedding-in-pipeline-split", action="store_true")
    parser.add_argument("--account-for-loss-in-pipeline-split", action="store_true")
    parser.add_argument("--no-overlap-p2p-communication", action="store_false",
                        dest="overlap_p2p_comm")
    a, unknown = parser.parse_known_args(args)
    a.transformer_pipeline_model_parallel_size = a.pipeline_model_parallel_size
    a.virtual_pipeline_model_parallel_size = None
    a.hybrid_layer_pattern = None
    a.decoder_num_layers = None
    a.rank = 0
    return a
