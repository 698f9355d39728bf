"""One chunk as Megatron-LM built it against paramlayout's manifest and layout of that chunk.

Each function returns a list of differences, each a tuple (what, field, Megatron-LM's value,
paramlayout's value). Megatron-LM's side is read from the objects its own code made: the
chunk's `named_parameters()`, its DistributedDataParallel's `_ParamAndGradBuffer`s, and the
shard ranges its optimizers compute from those buffers (`DistributedOptimizer.
_build_gbuf_range_map` for each data-parallel rank, `LayerWiseDistributedOptimizer.
_shard_params_from_layout` for Muon's buffers).
"""
import types

import torch

DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16",
               torch.uint8: "uint8"}


def param_fields(param):
    """What paramlayout records of a param, read from the attributes Megatron-LM set on it
    (manifest fields, docs/formats.md; absent ones are the defaults)."""
    return {
        "shape": list(param.shape),
        "dtype": DTYPE_NAMES.get(param.dtype, str(param.dtype)),
        "expert_parallel": getattr(param, "allreduce", True) is False,
        "shared_embedding": bool(getattr(param, "shared_embedding", False)),
        "embedding_or_output": bool(getattr(param, "is_embedding_or_output_parameter", False)),
        "use_muon": getattr(param, "use_muon", True) is not False,
    }


def manifest_fields(entry):
    return {
        "shape": list(entry["shape"]),
        "dtype": entry["dtype"],
        "expert_parallel": bool(entry.get("expert_parallel", False)),
        "shared_embedding": bool(entry.get("shared_embedding", False)),
        "embedding_or_output": bool(entry.get("embedding_or_output", False)),
        "use_muon": bool(entry.get("use_muon", True)),
    }


def trainable(module):
    """(name, param) of MODULE's trainable params, in named_parameters() order."""
    return [(n, p) for n, p in module.named_parameters() if p.requires_grad]


def compare_params(module, manifest):
    """The chunk's trainable params against the manifest's: order, names, fields."""
    diffs = []
    theirs = trainable(module)
    ours = manifest["params"]
    their_names = [n for n, _ in theirs]
    our_names = [e["name"] for e in ours]
    if their_names != our_names:
        missing = [n for n in their_names if n not in set(our_names)]
        extra = [n for n in our_names if n not in set(their_names)]
        for n in missing:
            diffs.append((n, "param", "present", "absent"))
        for n in extra:
            diffs.append((n, "param", "absent", "present"))
        if not missing and not extra:
            for i, (a, b) in enumerate(zip(their_names, our_names)):
                if a != b:
                    diffs.append((f"position {i}", "order", a, b))
                    break
    by_name = {e["name"]: e for e in ours}
    for name, param in theirs:
        entry = by_name.get(name)
        if entry is None:
            continue
        mine, yours = param_fields(param), manifest_fields(entry)
        for field in mine:
            if mine[field] != yours[field]:
                diffs.append((name, field, mine[field], yours[field]))
    return diffs


def buffer_key(buffer):
    first = buffer.params[0]
    return (DTYPE_NAMES[buffer.param_dtype], DTYPE_NAMES[buffer.grad_dtype],
            getattr(first, "allreduce", True) is False,
            bool(getattr(first, "is_managed_by_layer_wise_optimizer", False)))


def layout_key(b):
    return (b["param_dtype"], b["grad_dtype"], b["expert_parallel"], b["layerwise"])


def key_text(key):
    return (f"buffer ({key[0]} params, {key[1]} grads"
            f"{', expert-parallel' if key[2] else ''}{', layerwise' if key[3] else ''})")


def megatron_buffers(ddp):
    return list(ddp.buffers) + list(ddp.expert_parallel_buffers)


def compare_buffers(ddp, names, layout):
    """DDP's buffers against the layout's: keys, sizes, buckets, every param's range and
    index. NAMES maps id(param) to its name in the chunk."""
    diffs = []
    theirs = {buffer_key(b): b for b in megatron_buffers(ddp)}
    ours = {layout_key(b): b for b in layout["buffers"]}
    for key in theirs.keys() - ours.keys():
        diffs.append((key_text(key), "buffer", "present", "absent"))
    for key in ours.keys() - theirs.keys():
        diffs.append((key_text(key), "buffer", "absent", "present"))
    for key in theirs.keys() & ours.keys():
        mb, ob = theirs[key], ours[key]
        what = key_text(key)
        buckets = [(s, e, k.numel_unpadded) for (s, e), k in zip(mb.bucket_indices, mb.buckets)]
        our_buckets = [(k["start"], k["end"], k["numel_unpadded"]) for k in ob["buckets"]]
        for field, mine, yours in (("numel", mb.numel, ob["numel"]),
                                   ("numel_unpadded", mb.numel_unpadded, ob["numel_unpadded"]),
                                   ("num_shards", mb.num_optimizer_shards, ob["num_shards"]),
                                   ("buckets", buckets, our_buckets)):
            if mine != yours:
                diffs.append((what, field, mine, yours))
        index_of = dict(zip((id(p) for p in mb.params), mb.param_indices))
        our_params = {p["name"]: p for p in ob["params"]}
        their_names = set()
        for param, (start, end, bucket) in mb.param_index_map.items():
            name = names[id(param)]
            their_names.add(name)
            mine = (start, end, bucket, index_of[id(param)])
            p = our_params.get(name)
            if p is None:
                diffs.append((f"{what} {name}", "param", "present", "absent"))
                continue
            yours = (p["start"], p["end"], p["bucket"], p["index"])
            if mine != yours:
                diffs.append((f"{what} {name}", "start, end, bucket, index", mine, yours))
        for name in our_params.keys() - their_names:
            diffs.append((f"{what} {name}", "param", "absent", "present"))
    return diffs


class _RankOf:
    """A data-parallel group as the range-map functions ask it: rank() and size()."""

    def __init__(self, rank, size):
        self._rank, self._size = rank, size

    def rank(self):
        return self._rank

    def size(self):
        return self._size


def _our_shard_ranges(ob, rank):
    """Per bucket, the params' parts in RANK's shard: {(bucket, name): (start, end)}."""
    out = {}
    for b, k in enumerate(ob["buckets"]):
        shard = (k["end"] - k["start"]) // ob["num_shards"]
        lo, hi = k["start"] + rank * shard, k["start"] + (rank + 1) * shard
        for p in ob["params"]:
            if p["bucket"] == b and max(lo, p["start"]) < min(hi, p["end"]):
                out[(b, p["name"])] = (max(lo, p["start"]), min(hi, p["end"]))
    return out


def compare_shards(ddp, names, layout, max_ranks=None):
    """The distributed optimizer's shard of every bucket for each data-parallel rank, from
    DistributedOptimizer._build_gbuf_range_map; Muon's buffers: the shard each param is
    assigned to by LayerWiseDistributedOptimizer._shard_params_from_layout."""
    from megatron.core.optimizer.distrib_optimizer import DistributedOptimizer

    diffs = []
    ours = {layout_key(b): b for b in layout["buffers"]}
    layerwise = []
    for mb in megatron_buffers(ddp):
        key = buffer_key(mb)
        ob = ours.get(key)
        if ob is None or not ddp.ddp_config.use_distributed_optimizer:
            continue
        if key[3]:
            layerwise.append((mb, ob))
            continue
        group = mb.data_parallel_group
        size = group.size()
        ranks = range(size) if max_ranks is None or size <= max_ranks else \
            sorted({0, 1, size // 2, size - 1})
        for rank in ranks:
            mb.data_parallel_group = _RankOf(rank, size)
            try:
                ranges = DistributedOptimizer._build_gbuf_range_map(mb)
            finally:
                mb.data_parallel_group = group
            (per_bucket,) = ranges.values()
            mine = {}
            for b, data in enumerate(per_bucket):
                for param, r in data["param_map"].items():
                    world = r["gbuf_world"]
                    mine[(b, names[id(param)])] = (world.start, world.end)
            yours = _our_shard_ranges(ob, rank)
            if mine != yours:
                for k in sorted(mine.keys() | yours.keys()):
                    if mine.get(k) != yours.get(k):
                        diffs.append((f"{key_text(key)} dp rank {rank} bucket {k[0]} {k[1]}",
                                      "shard range", mine.get(k), yours.get(k)))
    if layerwise:
        diffs += _compare_layerwise(ddp, names, layerwise)
    return diffs


def _compare_layerwise(ddp, names, layerwise):
    from megatron.core.optimizer.layer_wise_optimizer import LayerWiseDistributedOptimizer

    dense = [p for mb, _ in layerwise if not buffer_key(mb)[2] for p in mb.params]
    expert = [p for mb, _ in layerwise if buffer_key(mb)[2] for p in mb.params]
    groups = [{"params": list(dense)}]
    if expert:
        groups.append({"params": list(expert), "is_expert_parallel": True})
    dp_size = ddp.dp_cp_group.size()
    edp_size = ddp.expt_dp_group.size()
    fake = types.SimpleNamespace(dp_cp=_RankOf(0, dp_size), expt_dp=_RankOf(0, edp_size))
    LayerWiseDistributedOptimizer._shard_params_from_layout(
        fake, [types.SimpleNamespace(param_groups=groups)], [ddp.full_param_layout], dp_size,
        edp_size)
    mine = {}
    for lists, kind in ((fake.dp_cp_params_list, dense), (fake.expt_dp_params_list, expert)):
        # None where the group has one rank (layer_wise_optimizer.py:631-635, 710-711): that
        # rank owns every param, its buckets' lists are [bucket.params_list] (:792-795,
        # :810-813): the one shard, 0.
        for shard, params in enumerate([kind] if lists is None else lists):
            for p in params:
                mine[names[id(p)]] = shard
    yours = {}
    for mb, ob in layerwise:
        for p in ob["params"]:
            k = ob["buckets"][p["bucket"]]
            shard = (k["end"] - k["start"]) // ob["num_shards"]
            yours[p["name"]] = (p["start"] - k["start"]) // shard
    return [(f"layerwise param {n}", "shard", mine.get(n), yours.get(n))
            for n in sorted(mine.keys() | yours.keys()) if mine.get(n) != yours.get(n)]
