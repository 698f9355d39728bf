"""Layout v1 -> the objects Megatron-LM's DistributedDataParallel(full_param_layout=...) takes.

Generate the layout ahead of time (`paramlayout plan`, checked and verified), then at
start-up:

    from paramlayout.megatron import full_param_layout
    layout = full_param_layout("layouts/stage0.layout.json", model_chunk,
                               expect={"dp": 64, "strategy": "layerwise"})
    model_chunk = DistributedDataParallel(config, ddp_config, model_chunk,
                                          full_param_layout=layout)

Every param is matched by name with the chunk's trainable params (the model's own names:
the chunk may be passed bare or inside its Float16Module), and names, sizes, dtypes
and the recorded options are checked first: any mismatch raises LayoutMismatch listing them.

For a whole job (`paramlayout job -o DIR`), each rank loads its own chunk's layout:

    from paramlayout.megatron import job_param_layout
    layout = job_param_layout("job/job.json", model_chunk, pp_rank=pp_rank, vp_stage=vp_stage)
"""
import hashlib
import json
import os

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "uint8": torch.uint8}


class LayoutMismatch(ValueError):
    """The layout does not describe this model chunk."""


def megatron_classes():
    """(BufferKey, PerBufferParamLayout, FullParamLayout) from Megatron-LM."""
    from megatron.core.optimizer.param_layout import (BufferKey, FullParamLayout,
                                                      PerBufferParamLayout)
    return BufferKey, PerBufferParamLayout, FullParamLayout


def _storage_dtype(param):
    for cls in type(param).__mro__:
        if cls.__name__ in ("Float8Tensor", "Float8TensorBase", "MXFP8Tensor", "NVFP4Tensor"):
            return torch.uint8
    return param.dtype


def _trainable_params(model_chunk):
    """The chunk's trainable params by the names the layout gives them: those of the model
    itself, without the `module.` prefixes its wrappers add (Float16Module, as DDP receives
    the chunk in training, and DistributedDataParallel each hold the model as `.module`)."""
    named = [(name, p) for name, p in model_chunk.named_parameters() if p.requires_grad]
    while named and all(name.startswith("module.") for name, _ in named):
        named = [(name[len("module."):], p) for name, p in named]
    return dict(named)


def full_param_layout(layout_path, model_chunk, expect=None, classes=None):
    """The FullParamLayout of `model_chunk` that `layout_path` describes.

    expect: options the job runs with (e.g. {"dp": 64, "strategy": "layerwise"}), checked
    against those the layout was planned with. classes: (BufferKey, PerBufferParamLayout,
    FullParamLayout), by default Megatron-LM's own.
    """
    BufferKey, PerBufferParamLayout, FullParamLayout = classes or megatron_classes()
    with open(layout_path) as f:
        layout = json.load(f)
    if not str(layout.get("schema", "")).startswith("paramlayout.layout/v1"):
        raise LayoutMismatch(f"{layout_path}: not a paramlayout layout v1 file")
    problems = []
    for key, value in (expect or {}).items():
        recorded = layout["options"].get(key)
        if recorded != value:
            problems.append(f"options.{key}: the layout was planned with {recorded!r}, "
                            f"the job uses {value!r}")
    trainable = _trainable_params(model_chunk)
    placed = set()
    full = FullParamLayout()
    for i, b in enumerate(layout["buffers"]):
        key = BufferKey(param_dtype=DTYPES[b["param_dtype"]], grad_dtype=DTYPES[b["grad_dtype"]],
                        is_expert_parallel=b["expert_parallel"],
                        is_managed_by_layer_wise_optimizer=b["layerwise"])
        per = PerBufferParamLayout()
        per.bucket_indices = [(k["start"], k["end"]) for k in b["buckets"]]
        per.per_bucket_numel_unpadded = [k["numel_unpadded"] for k in b["buckets"]]
        per.num_optimizer_shards = b["num_shards"]
        for p in b["params"]:
            name = p["name"]
            where = f"buffer {i}, param {name!r}"
            param = trainable.get(name)
            if param is None:
                problems.append(f"{where}: not a trainable param of the model chunk")
                continue
            placed.add(name)
            if param.numel() != p["end"] - p["start"]:
                problems.append(f"{where}: {p['end'] - p['start']} elements in the layout, "
                                f"{param.numel()} in the model ({list(param.shape)})")
            if _storage_dtype(param) != key.param_dtype:
                problems.append(f"{where}: stored as {_storage_dtype(param)}, the buffer "
                                f"holds {key.param_dtype}")
            if (getattr(param, "allreduce", True) is False) != key.is_expert_parallel:
                problems.append(f"{where}: expert_parallel does not match the param's "
                                f"allreduce attribute")
            per.param_index_map[param] = (p["start"], p["end"], p["bucket"])
        # Megatron-LM lists each param's index in model order: the counter's order.
        per.param_indices = sorted(p["index"] for p in b["params"])
        full.layouts[key] = per
    for name in trainable:
        if name not in placed:
            problems.append(f"param {name!r}: trainable in the model chunk, missing from the layout")
    if problems:
        shown = "\n  ".join(problems[:20])
        more = f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else ""
        raise LayoutMismatch(f"{layout_path}: the layout does not fit the model chunk:\n"
                             f"  {shown}{more}")
    return full


def job_param_layout(job_path, model_chunk, pp_rank, vp_stage=0, classes=None):
    """The FullParamLayout of the (pp_rank, vp_stage) chunk of a job that `paramlayout job`
    wrote, checked against the sizes the job planned it for."""
    with open(job_path) as f:
        job = json.load(f)
    if not str(job.get("schema", "")).startswith("paramlayout.job/v1"):
        raise LayoutMismatch(f"{job_path}: not a paramlayout job v1 file")
    for chunk in job["chunks"]:
        if chunk["stage"] == pp_rank and chunk["chunk"] == vp_stage:
            break
    else:
        raise LayoutMismatch(f"{job_path}: no chunk for pipeline stage {pp_rank}, virtual "
                             f"chunk {vp_stage} (pp {job['pp']}, vpp {job['vpp']})")
    expect = {"strategy": job["strategy"], "dp": job["dense_shards"],
              "bucket_size": chunk["bucket_size"]}
    layout_path = os.path.join(os.path.dirname(os.path.abspath(job_path)), chunk["layout"])
    recorded = chunk.get("layout_sha256")
    if recorded:
        with open(layout_path, "rb") as f:
            actual = hashlib.sha256(f.read()).hexdigest()
        if actual != recorded:
            raise LayoutMismatch(
                f"stage{pp_rank}.chunk{vp_stage}: {chunk['layout']} is not the file {job_path} "
                f"names (SHA-256 {actual[:12]}, job.json records {recorded[:12]}); "
                f"`paramlayout check` says more")
    return full_param_layout(layout_path, model_chunk, expect=expect, classes=classes)


class ModelMismatch(LayoutMismatch):
    """The model's DDP buffers are not what the job planned."""


def ddp_report(ddp_chunks, pp_rank, rank, tp_rank=0):
    """The lines a Megatron-LM start-up logs for `ddp_chunks` (one rank's
    DistributedDataParallel chunks), prefixed `[rankR]:` as torchrun prefixes them: the param
    count get_model prints and each buffer's bucket report, as param_and_grad_buffer.py
    formats it."""
    params = sum(p.nelement() for ddp in ddp_chunks for p in ddp.module.parameters())
    lines = [" > number of parameters on (tensor, gtp_weight_remat, pipeline) model parallel "
             f"rank ({tp_rank}, 0, {pp_rank}): {params}"]
    for ddp in ddp_chunks:
        names = {p: n for n, p in ddp.module.named_parameters()}
        for buffer in list(ddp.buffers) + list(ddp.expert_parallel_buffers):
            lines.append("Number of buckets for gradient all-reduce / reduce-scatter: "
                         f"{len(buffer.buckets)}")
            for index, bucket in enumerate(buffer.buckets):
                numel = sum(p.data.nelement() for p in bucket.params_list)
                lines.append(f"Params for bucket {index + 1} ({numel} elements, "
                             f"{bucket.grad_data.nelement()} padded size, "
                             f"{len(bucket.params_with_extra_main_grads)} param(s) with extra "
                             "main_grads):")
                lines += [f"\t{names[p]} (param.main_grad.dtype={p.main_grad.dtype})"
                          for p in bucket.params_list]
    return "".join(f"[rank{rank}]:{line}\n" for line in lines)


def check_model(job_path, ddp_chunks, pp_rank, tp_rank=0, binary=None):
    """Raises ModelMismatch, naming each difference, when this rank's DDP chunks (after
    get_model) are not what the job planned for pipeline stage `pp_rank`: their buffers'
    buckets, each bucket's elements, padded size and params, each param's main-grad dtype,
    and the stage's param count, as `paramlayout check JOB --against-log` compares a start-up
    log. Call it on each stage's first rank (tensor and data-parallel rank 0), before step 1:

        model = get_model(model_provider, model_type)
        from paramlayout.megatron import check_model
        check_model("job/job.json", model, pp_rank=mpu.get_pipeline_model_parallel_rank())
    """
    import subprocess

    import paramlayout
    with open(job_path) as f:
        job = json.load(f)
    rank = pp_rank * (job["world_size"] // job["pp"])
    result = subprocess.run([binary or paramlayout.binary(), "check", job_path, "--against-log",
                             "-"], input=ddp_report(ddp_chunks, pp_rank, rank, tp_rank),
                            capture_output=True, text=True)
    if result.returncode != 0:
        found = [line for line in (result.stdout + result.stderr).splitlines()
                 if not line.startswith("memory: ")]
        raise ModelMismatch(f"stage {pp_rank}: the model is not what {job_path} planned:\n  "
                            + "\n  ".join(found))
