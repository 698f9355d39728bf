"""Pipeline arguments for pipeline_differential.py: Megatron-LM's own unit-test goldens (to
check the harness), the named cases written to testdata/pipeline/cases.json, and random
arguments."""
import itertools


def pipeline(pp, layers, *more, mtp=None):
    args = ["--num-layers", str(layers), "--pipeline-model-parallel-size", str(pp)]
    args += [str(a) for a in more]
    return args + (["--mtp-num-layers", str(mtp)] if mtp is not None else [])


VPP = "--num-virtual-stages-per-pipeline-rank"
PER_STAGE = "--num-layers-per-virtual-pipeline-stage"
FIRST = "--decoder-first-pipeline-num-layers"
LAST = "--decoder-last-pipeline-num-layers"
EMB = "--account-for-embedding-in-pipeline-split"
LOSS = "--account-for-loss-in-pipeline-split"
LAYOUT = "--pipeline-model-parallel-layout"

_CUDA_GRAPHS = "tests/unit_tests/transformer/test_cuda_graphs.py:697-750"
_LAYER = "tests/unit_tests/transformer/test_transformer_layer.py:225-320"

# Megatron-LM's tests: 1-based first and last layer numbers per chunk in vp-major order, or
# 0-based offsets per (pp rank, vp stage).
GOLDENS = [
    (_CUDA_GRAPHS, pipeline(1, 4), {"first_last": ([1], [4])}),
    (_CUDA_GRAPHS, pipeline(2, 8), {"first_last": ([1, 5], [4, 8])}),
    (_CUDA_GRAPHS, pipeline(2, 8, VPP, 2), {"first_last": ([1, 3, 5, 7], [2, 4, 6, 8])}),
    (_CUDA_GRAPHS, pipeline(4, 14, EMB, LOSS), {"first_last": ([1, 4, 8, 12], [3, 7, 11, 14])}),
    (_CUDA_GRAPHS, pipeline(4, 14, VPP, 2, EMB, LOSS),
     {"first_last": ([1, 2, 4, 6, 8, 10, 12, 14], [1, 3, 5, 7, 9, 11, 13, 14])}),
    (_CUDA_GRAPHS, pipeline(4, 12, FIRST, 2, LAST, 2),
     {"first_last": ([1, 3, 7, 11], [2, 6, 10, 12])}),
    (_CUDA_GRAPHS, pipeline(4, 12, VPP, 2, FIRST, 2, LAST, 2),
     {"first_last": ([1, 2, 4, 6, 7, 8, 10, 12], [1, 3, 5, 6, 7, 9, 11, 12])}),
    (_CUDA_GRAPHS, pipeline(4, 14, LAYOUT, "Et|tt|tt|tt|tt|tt|tt|tL"),
     {"first_last": ([1, 2, 4, 6, 8, 10, 12, 14], [1, 3, 5, 7, 9, 11, 13, 14])}),
    (_LAYER, pipeline(4, 30, VPP, 2, FIRST, 8, LAST, 10),
     {"offsets": {(0, 0): 0, (0, 1): 15, (1, 0): 4, (1, 1): 19, (2, 0): 7, (2, 1): 22,
                  (3, 0): 10, (3, 1): 25}}),
    (_LAYER, pipeline(4, 26, VPP, 2, FIRST, 8),
     {"offsets": {(0, 0): 0, (0, 1): 13, (1, 0): 4, (1, 1): 17, (2, 0): 7, (2, 1): 20,
                  (3, 0): 10, (3, 1): 23}}),
    (_LAYER, pipeline(4, 26, VPP, 2, LAST, 8),
     {"offsets": {(0, 0): 0, (0, 1): 13, (1, 0): 3, (1, 1): 16, (2, 0): 6, (2, 1): 19,
                  (3, 0): 9, (3, 1): 22}}),
    (_LAYER, pipeline(4, 24, VPP, 2),
     {"offsets": {(0, 0): 0, (0, 1): 12, (1, 0): 3, (1, 1): 15, (2, 0): 6, (2, 1): 18,
                  (3, 0): 9, (3, 1): 21}}),
]

DEEPSEEK_V3_LAYOUT = "Et*3|(tt|)*29m|L"

# (name, Megatron-LM arguments, for a refusal: a fragment of paramlayout's message).
NAMED = [
    # Megatron-LM's unit-test goldens (see GOLDENS) and the worked examples they confirm.
    ("megatron test: 4 layers, pp 1", pipeline(1, 4), None),
    ("megatron test: 8 layers, pp 2", pipeline(2, 8), None),
    ("megatron test: 8 layers, pp 2, vpp 2", pipeline(2, 8, VPP, 2), None),
    ("megatron test: 14 layers, pp 4, account for embedding and loss",
     pipeline(4, 14, EMB, LOSS), None),
    ("megatron test: 14 layers, pp 4, vpp 2, account for embedding and loss",
     pipeline(4, 14, VPP, 2, EMB, LOSS), None),
    ("megatron test: 12 layers, pp 4, first 2, last 2", pipeline(4, 12, FIRST, 2, LAST, 2), None),
    ("megatron test: 12 layers, pp 4, vpp 2, first 2, last 2",
     pipeline(4, 12, VPP, 2, FIRST, 2, LAST, 2), None),
    ("megatron test: 14 layers, pp 4, layout of 8 stages",
     pipeline(4, 14, LAYOUT, "Et|tt|tt|tt|tt|tt|tt|tL"), None),
    ("megatron test: 30 layers, pp 4, vpp 2, first 8, last 10",
     pipeline(4, 30, VPP, 2, FIRST, 8, LAST, 10), None),
    ("megatron test: 26 layers, pp 4, vpp 2, first 8", pipeline(4, 26, VPP, 2, FIRST, 8), None),
    ("megatron test: 26 layers, pp 4, vpp 2, last 8", pipeline(4, 26, VPP, 2, LAST, 8), None),
    ("megatron test: 24 layers, pp 4, 3 layers per virtual stage",
     pipeline(4, 24, PER_STAGE, 3), None),
    # Real jobs.
    ("DeepSeek-V3: pp 16, layout Et*3|(tt|)*29m|L, 1 MTP layer",
     pipeline(16, 61, LAYOUT, DEEPSEEK_V3_LAYOUT, mtp=1), None),
    ("DeepSeek-V3: the same layout with a cosmetic comma",
     pipeline(16, 61, LAYOUT, "Et*3|(tt|)*29,m|L", mtp=1), None),
    ("DeepSeek-V3: pp 16, first 4, last 1, 1 MTP layer",
     pipeline(16, 61, FIRST, 4, LAST, 1, mtp=1), None),
    ("DeepSeek-V3: pp 8, vpp 4 by layout, MTP with the loss",
     pipeline(8, 61, LAYOUT, "Et|(tt|)*30mL", mtp=1), None),
    ("Llama-3.1-405B: pp 16, vpp 2, account for embedding and loss",
     pipeline(16, 126, VPP, 2, EMB, LOSS), None),
    ("Llama-3.1-405B: pp 16, 2 layers per virtual stage, account for embedding and loss",
     pipeline(16, 126, PER_STAGE, 2, EMB, LOSS), None),
    ("Llama-3.1-405B: pp 8, vpp 8, account for embedding and loss",
     pipeline(8, 126, VPP, 8, EMB, LOSS), None),
    ("Llama-3.1-405B: pp 16, first 7, last 7", pipeline(16, 126, FIRST, 7, LAST, 7), None),
    ("Llama-3.1-405B: pp 16, vpp 2, first 6, last 8",
     pipeline(16, 126, VPP, 2, FIRST, 6, LAST, 8), None),
    ("pp 16, vpp 2, first 2, last 2", pipeline(16, 60, VPP, 2, FIRST, 2, LAST, 2), None),
    ("pp 16, first only", pipeline(16, 62, FIRST, 2), None),
    ("pp 8, vpp 2, last only", pipeline(8, 30, VPP, 2, LAST, 2), None),
    ("pp 2, first and last, no middle stages", pipeline(2, 7, FIRST, 3, LAST, 4), None),
    ("pp 1, first stage holds every layer", pipeline(1, 5, FIRST, 5), None),
    ("pp 1, first and last: the last stage's count is what the one stage builds",
     pipeline(1, 6, FIRST, 2, LAST, 6), None),
    ("account for embedding only, vpp 2", pipeline(4, 15, VPP, 2, EMB), None),
    ("account for loss only, vpp 2, 2 MTP layers", pipeline(4, 15, VPP, 2, LOSS, mtp=2), None),
    ("account for loss: the last chunk builds no layer, the final norm moves with MTP",
     pipeline(4, 7, VPP, 2, LOSS, mtp=1), None),
    ("account for embedding: the first chunk builds no layer", pipeline(4, 7, VPP, 2, EMB), None),
    ("account for loss without MTP: the final norm stays on the last chunk",
     pipeline(4, 7, VPP, 2, LOSS), None),
    ("account for loss with --mtp-num-layers 0: the final norm moves as with MTP layers",
     pipeline(4, 7, VPP, 2, LOSS, mtp=0), None),
    ("pp 1 with 2 MTP layers", pipeline(1, 6, mtp=2), None),
    ("layout: MTP with the loss on the last stage",
     pipeline(4, 8, LAYOUT, "Ett|ttt|ttt|mL", mtp=1), None),
    ("layout: a standalone MTP chunk, vpp 2",
     pipeline(4, 8, LAYOUT, "Et|tt|tt|t|t|t|m|L", mtp=1), None),
    ("layout: empty stages", pipeline(4, 4, LAYOUT, "E|tt||tt|(|)*3L"), None),
    ("layout: MTP on pp rank 0 without virtual stages", pipeline(2, 1, LAYOUT, "Etm|L", mtp=1),
     None),
    ("layout: 3 MTP layers, vpp 3", pipeline(2, 10, LAYOUT, "Et*2|t*2|t*2|t*2|t*2|mmmL", mtp=3),
     None),
    # Refusals.
    ("refused: layers not divisible by stages", pipeline(4, 13),
     "the 13 layers are not divisible by the 4 pipeline stages"),
    ("refused: layers per stage not divisible by vpp", pipeline(4, 12, VPP, 2),
     "the 3 layers of each pipeline stage are not divisible by the 2 virtual chunks"),
    ("refused: both virtual-stage arguments", pipeline(4, 16, VPP, 2, PER_STAGE, 2),
     "--num-virtual-stages-per-pipeline-rank: cannot be combined with "
     "--num-layers-per-virtual-pipeline-stage"),
    ("refused: layers per virtual stage with uneven stages",
     pipeline(4, 12, PER_STAGE, 1, FIRST, 2, LAST, 2),
     "use --num-virtual-stages-per-pipeline-rank with uneven first or last stages"),
    ("refused: uneven stages with account-for", pipeline(4, 12, FIRST, 2, EMB),
     "cannot be combined with --account-for-embedding/loss-in-pipeline-split"),
    ("refused: layout with uneven stages", pipeline(2, 4, LAYOUT, "Ett|ttL", FIRST, 2),
     "--pipeline-model-parallel-layout: cannot be combined with the other pipeline split "
     "arguments"),
    ("refused: layout with a virtual-stage argument", pipeline(2, 4, LAYOUT, "Ett|ttL", VPP, 1),
     "--pipeline-model-parallel-layout: cannot be combined with "
     "--num-virtual-stages-per-pipeline-rank"),
    ("refused: first stage not divisible by vpp", pipeline(4, 12, VPP, 2, FIRST, 3, LAST, 3),
     "the first and last stages' layers (3 and 3) must be divisible by the 2 virtual chunks"),
    ("refused: middle layers not divisible by middle stages", pipeline(4, 13, FIRST, 2, LAST, 2),
     "the 9 middle layers are not divisible by the 2 middle stages"),
    ("refused: first and last stages hold more than every layer",
     pipeline(4, 4, FIRST, 3, LAST, 3),
     "the first and last stages hold 6 layers, more than the model's 4"),
    ("refused: first stage of 0 layers", pipeline(4, 12, FIRST, 0),
     "--decoder-first-pipeline-num-layers: expected an integer in [1, "),
    ("refused: virtual stages with pp 1", pipeline(1, 4, VPP, 2),
     "--pipeline-model-parallel-size: must be greater than 1 with virtual pipeline stages"),
    ("refused: vpp with pp 2 and no p2p overlap",
     pipeline(2, 8, VPP, 2, "--no-overlap-p2p-communication"),
     "must be greater than 2 with virtual pipeline stages and --no-overlap-p2p-communication"),
    ("refused: layout stages not a multiple of pp", pipeline(2, 4, LAYOUT, "Et|tt|tL"),
     "--pipeline-model-parallel-layout has 3 stages, not a multiple of the 2 pipeline stages"),
    ("refused: layout decoder count differs from --num-layers", pipeline(2, 5, LAYOUT, "Ett|ttL"),
     "the layout holds 4 decoder layers 't', but --num-layers is 5"),
    ("refused: layout without the embedding", pipeline(2, 4, LAYOUT, "tt|ttL"),
     "the layout must start with the embedding 'E'"),
    ("refused: layout with an unknown layer", pipeline(2, 4, LAYOUT, "Ett|txL"),
     "'x' is not a layer"),
    ("refused: layout MTP count differs from --mtp-num-layers",
     pipeline(2, 4, LAYOUT, "Ett|ttmL", mtp=2),
     "the layout holds 1 multi-token prediction layers 'm', but --mtp-num-layers is 2"),
    ("refused: layout MTP before a decoder layer", pipeline(2, 4, LAYOUT, "Ettm|ttL", mtp=1),
     "decoder layers 't' must come before multi-token prediction layers 'm'"),
    ("refused: layout MTP not in a rank's last virtual stage",
     pipeline(2, 3, LAYOUT, "Et|t|tm|||L", mtp=1),
     "not in stage 0's chunk 1 (layout stage 2)"),
    ("refused: layout MTP layers split over two stages",
     pipeline(2, 4, LAYOUT, "Ett|tt|m|mL", mtp=2),
     "all multi-token prediction layers must be in one stage"),
    ("refused: an empty layout", pipeline(1, 1, LAYOUT, ""),
     "--pipeline-model-parallel-layout: expected a layout such as"),
    ("refused: first and last stages on one pipeline stage", pipeline(1, 5, FIRST, 2, LAST, 3),
     "a single pipeline stage builds --decoder-last-pipeline-num-layers layers, 3, but the "
     "model has 5"),
    ("refused: uneven stages with vpp and no middle stage",
     pipeline(2, 8, VPP, 2, FIRST, 4, LAST, 4),
     "uneven first and last stages with virtual pipeline chunks need a middle stage"),
    ("refused: Megatron-LM builds some layers twice (first 5 + last 1 of 5, pp 3)",
     pipeline(3, 5, FIRST, 5, LAST, 1), "the first and last stages hold 6 layers, more than"),
]


# Random arguments ---------------------------------------------------------------------------

def _split_arguments(rng, pp, kind):
    """Even, uneven or account-for arguments, mostly valid, sometimes a little off."""
    vpp = rng.choice([1, 1, 2, 2, 3, 4, 8]) if pp > 1 else rng.choice([1] * 9 + [2])
    most = max(1, 128 // (pp * vpp))
    per_chunk = rng.choice([rng.randint(0, min(most, 4)), rng.randint(1, most)])
    args = []
    if kind == "uneven":
        first = vpp * rng.randint(1, max(1, min(most, 6))) if rng.random() < 0.8 else None
        last = vpp * rng.randint(1, max(1, min(most, 6))) if rng.random() < 0.8 or first is None \
            else None
        if rng.random() < 0.1:
            first = rng.choice([first, -1, 0, 1, 3, 5])
        middle = pp - (first is not None) - (last is not None)
        layers = (first or 0) + (last or 0) + max(middle, 0) * vpp * per_chunk
        args += [FIRST, str(first)] if first is not None else []
        args += [LAST, str(last)] if last is not None else []
        per_stage_ok = rng.random() < 0.1
    else:
        emb, loss = (False, False) if kind == "even" else \
            rng.choice([(True, False), (False, True), (True, True)])
        layers = pp * vpp * per_chunk - emb - loss
        args += [EMB] * emb + [LOSS] * loss
        per_stage_ok = True
    if rng.random() < 0.15:
        layers += rng.choice([-2, -1, 1, 2])
    if not 1 <= layers <= 128 or rng.random() < 0.03:
        layers = rng.randint(1, 128)
    if vpp > 1 or rng.random() < 0.1:
        if per_stage_ok and rng.random() < 0.5:
            args += [PER_STAGE, str(per_chunk if per_chunk > 0 else rng.randint(-1, 4))]
        else:
            args += [VPP, str(vpp if rng.random() < 0.95 else rng.randint(-1, 3))]
    return ["--num-layers", str(layers)] + args


def _render_stage(stage, rng):
    out = ""
    for ch, run in itertools.groupby(stage):
        n = len(list(run))
        out += f"{ch}*{n}" if n > 1 and rng.random() < 0.5 else ch * n
    return out


def render_layout(stages, rng):
    """Stages as a layout string, with x*n, (stages|)*n and commas at random."""
    parts = []
    i = 0
    while i < len(stages):
        k = 1
        while i + k < len(stages) - 1 and stages[i + k] == stages[i]:
            k += 1
        text = _render_stage(stages[i], rng)
        grouped = k > 1 and rng.random() < 0.6
        parts.append((f"({text}|)*{k}" if grouped else text) + ("," if rng.random() < 0.1 else ""))
        parts.append("" if grouped or i + (k if grouped else 1) == len(stages) else "|")
        i += k if grouped else 1
    return "".join(parts)


def _mutate(text, rng):
    i = rng.randrange(len(text) + 1)
    how = rng.randrange(6)
    if how == 0:
        return text[:i] + rng.choice("xT ()*2") + text[i:]
    if how == 1:
        return text.replace("|", "", 1)
    if how == 2:
        return text[:i] + "|" + text[i:]
    if how == 3:
        return text.replace("E", "", 1)
    if how == 4:
        return text[:i] + "t" + text[i:]
    return text + "L"


def _layout_arguments(rng, pp, mtp):
    vpp = rng.choice([1, 1, 2, 2, 3, 4]) if pp > 1 else rng.choice([1] * 9 + [2])
    count = pp * vpp
    layers = rng.choice([rng.randint(1, 16), rng.randint(1, 128), min(128, 2 * count - 1)])
    cuts = sorted(rng.choices(range(layers + 1), k=count - 1))
    decoder = [b - a for a, b in zip([0] + cuts, cuts + [layers])]
    stages = ["t" * n for n in decoder]
    if mtp:
        last_decoder = max(i for i, n in enumerate(decoder) if n)
        valid = [s for s in range(count) if s // pp == vpp - 1 and s >= last_decoder]
        at = rng.choice(valid) if valid and rng.random() < 0.85 else rng.randrange(count)
        stages[at] += "m" * mtp
    embedding_at = 0 if rng.random() < 0.95 else rng.randrange(count)
    stages[embedding_at] = "E" + stages[embedding_at]
    loss_at = count - 1 if rng.random() < 0.95 else rng.randrange(count)
    stages[loss_at] += "L"
    text = render_layout(stages, rng)
    if rng.random() < 0.12:
        text = _mutate(text, rng)
    args = ["--num-layers", str(layers), LAYOUT, text]
    flag_mtp = mtp if rng.random() < 0.9 else rng.choice([None, 1, 2, (mtp or 0) + 1])
    if rng.random() < 0.05:
        args += rng.choice([[FIRST, "2"], [EMB], [LOSS], [VPP, str(vpp)], [PER_STAGE, "1"]])
    return args + (["--mtp-num-layers", str(flag_mtp)] if flag_mtp else [])


def _wild_arguments(rng):
    """Any of the arguments, with any values: mostly refusals."""
    args = ["--num-layers", str(rng.randint(1, 128))]
    for name in (FIRST, LAST, VPP, PER_STAGE):
        if rng.random() < 0.3:
            args += [name, str(rng.choice([-1, 0, 1, 2, 3, 4, 8, rng.randint(1, 64)]))]
    args += [name for name in (EMB, LOSS) if rng.random() < 0.3]
    if rng.random() < 0.2:
        args += [LAYOUT, "".join(rng.choice("EtmL|()*,23") for _ in range(rng.randint(1, 24)))]
    elif rng.random() < 0.05:
        args += [LAYOUT, rng.choice(["", ",", "|", "EL", "E|L", "()*2EtL", "Et*0L"])]
    if rng.random() < 0.3:
        args += ["--mtp-num-layers", str(rng.randint(1, 3))]
    return args


def _small_arguments(rng):
    """Few layers and stages, every argument near its edges: where off-by-ones show."""
    layers = rng.randint(1, 9)
    args = ["--num-layers", str(layers)]
    for name in (FIRST, LAST):
        if rng.random() < 0.5:
            args += [name, str(rng.randint(0, layers + 1))]
    if rng.random() < 0.5:
        args += [rng.choice([VPP, PER_STAGE]), str(rng.randint(0, 3))]
    args += [name for name in (EMB, LOSS) if rng.random() < 0.2]
    return args


def random_arguments(rng):
    pp = rng.choice([1, 2, 2, 3, 4, 4, 8, 8, 16, 16, rng.randint(1, 16)])
    kind = rng.choices(["even", "uneven", "account", "layout", "wild", "small"],
                       weights=[2, 2, 2, 3, 1, 2])[0]
    mtp = rng.choice([None, None, None, 0, 1, 1, 2, 3])
    if kind == "layout":
        args = _layout_arguments(rng, pp, mtp)
    elif kind == "wild":
        args = _wild_arguments(rng)
    elif kind == "small":
        pp = rng.randint(1, 4)
        args = _small_arguments(rng) + (["--mtp-num-layers", str(mtp)] if mtp is not None else [])
    else:
        args = _split_arguments(rng, pp, kind) + (
            ["--mtp-num-layers", str(mtp)] if mtp is not None else [])
    if rng.random() < 0.05:
        args.append("--no-overlap-p2p-communication")
    return ["--pipeline-model-parallel-size", str(pp)] + args


def sweep_arguments():
    """Every small uneven, account-for and virtual-stage combination: pp 1..4, 1..8 layers,
    first and last stages of 0..all layers or unset, vpp 2 or 3 or 1 or 2 layers per virtual
    stage, with and without an MTP layer."""
    for pp, layers, mtp in itertools.product(range(1, 5), range(1, 9), (None, 1)):
        sizes = [None] + list(range(layers + 1))
        for first, last in itertools.product(sizes, sizes):
            uneven = [FIRST, first] * (first is not None) + [LAST, last] * (last is not None)
            accounts = ([],) if uneven else ([], [EMB], [LOSS], [EMB, LOSS])
            for virtual, account in itertools.product(
                    ([], [VPP, 2], [VPP, 3], [PER_STAGE, 1], [PER_STAGE, 2]), accounts):
                yield pipeline(pp, layers, *uneven, *virtual, *account, mtp=mtp)
