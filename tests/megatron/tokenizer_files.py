"""Small tokenizer files of every kind a launch line can name, trained here by the libraries
Megatron-LM reads them with (Hugging Face's tokenizers, sentencepiece; tiktoken's rank file
written as Megatron-LM's TikTokenizer reads it), and the launch lines that name them. The
real-model judge builds each line's tokenizer with Megatron-LM's own build_tokenizer, so the
vocabulary paramlayout counts from the same files is held against the one Megatron-LM pads.

GPT2BPETokenizer is not among them: Megatron-LM reads its files through the Hub's `gpt2`
tokenizer config (megatron_hf_tokenizer.py:40-44, 99), which the judge has no network for."""
import base64
import io
import json
from pathlib import Path

# A corpus with enough distinct words for every trainer's vocabulary below.
CORPUS = [
    f"{w} {v} the {w}{v} of layout {n} buckets shard rank gradient parameter"
    for n, (w, v) in enumerate(zip(
        "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split() * 8,
        "red green blue cyan magenta yellow black white grey orange violet indigo".split() * 8))
]

# A small GPT the tokenizer's vocabulary is the only unknown of; divisible by 1, so that
# Megatron-LM's padding leaves the tokenizer's count as the embedding's rows.
MODEL = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
         "--max-position-embeddings", "128", "--seq-length", "128"]


def _hf_folder(folder, model, trainer, config=None):
    """A Hugging Face tokenizer folder: tokenizer.json trained on CORPUS and, with CONFIG
    (the special tokens of PreTrainedTokenizerFast), the tokenizer_config.json transformers
    saves with it."""
    from tokenizers import Tokenizer, pre_tokenizers
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.train_from_iterator(CORPUS, trainer)
    folder.mkdir(parents=True, exist_ok=True)
    if config is None:
        tokenizer.save(str(folder / "tokenizer.json"))
    else:
        from transformers import PreTrainedTokenizerFast
        PreTrainedTokenizerFast(tokenizer_object=tokenizer, **config).save_pretrained(folder)
    return str(folder)


def _sentencepiece(path, **options):
    import sentencepiece
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(CORPUS), model_writer=model,
                                             minloglevel=2, **options)
    path.write_bytes(model.getvalue())
    return str(path)


def _tiktoken_ranks(path, merges):
    """The rank file TikTokenizer reads (tiktoken_tokenizer.py:31-75): the 256 bytes, then
    MERGES pairs of letters, as [{rank, token_bytes (base64), token_str}]."""
    tokens = [bytes([b]) for b in range(256)]
    letters = b"abcdefghijklmnopqrstuvwxyz"
    tokens += [bytes([letters[i % 26], letters[i // 26 % 26]]) for i in range(merges)]
    ranks = [{"rank": r, "token_bytes": base64.b64encode(t).decode(),
              "token_str": t.decode("latin-1")} for r, t in enumerate(tokens)]
    path.write_text(json.dumps(ranks))
    return str(path)


def write(folder):
    """Writes the tokenizers under FOLDER; returns their paths by name."""
    from tokenizers import models, trainers
    folder = Path(folder)
    specials = ["<unk>", "<s>", "</s>"]
    return {
        "hf-bpe": _hf_folder(folder / "hf-bpe", models.BPE(unk_token="<unk>"),
                             trainers.BpeTrainer(vocab_size=150, special_tokens=specials)),
        # transformers adds a pad token the vocabulary lacks to the saved added tokens.
        "hf-bpe-config": _hf_folder(
            folder / "hf-bpe-config", models.BPE(unk_token="<unk>"),
            trainers.BpeTrainer(vocab_size=140, special_tokens=specials),
            {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
             "pad_token": "<pad>"}),
        "hf-unigram": _hf_folder(folder / "hf-unigram", models.Unigram(),
                                 trainers.UnigramTrainer(vocab_size=90, special_tokens=specials,
                                                         unk_token="<unk>")),
        "hf-wordlevel": _hf_folder(folder / "hf-wordlevel", models.WordLevel(unk_token="<unk>"),
                                   trainers.WordLevelTrainer(special_tokens=specials)),
        "sentencepiece": _sentencepiece(folder / "sp.model", vocab_size=70,
                                        user_defined_symbols=["<sep>"]),
        "sentencepiece-bpe": _sentencepiece(folder / "sp-bpe.model", vocab_size=80,
                                            model_type="bpe"),
        # Special tokens a config names that its tokenizer.json lacks, as hand-edited Hub
        # folders have them: transformers adds each.
        "hf-config-tokens": _edited(
            folder / "hf-bpe-config", folder / "hf-config-tokens", "tokenizer_config.json",
            {"pad_token": "<pad2>", "image_token": "<img>", "sep_token": "</s>",
             "extra_special_tokens": {"video_token": "<video>"},
             "additional_special_tokens": ["<a>", "<s>"]}),
        "hf-special-map": _edited(
            folder / "hf-bpe", folder / "hf-special-map", "special_tokens_map.json",
            {"pad_token": {"content": "<pad>", "lstrip": False}, "mask_token": "<mask>",
             "additional_special_tokens": ["<q1>"], "extra_special_tokens": ["<e2>"]}),
        # A map beside a config: its keys replace the config's.
        "hf-config-and-map": _edited(
            folder / "hf-special-map", folder / "hf-config-and-map", "tokenizer_config.json",
            {"pad_token": "<p1>", "extra_special_tokens": ["<e1>"]}),
        "tiktoken": _tiktoken_ranks(folder / "ranks.json", 400),
        "not-a-model": _garbage(folder / "garbage.model"),
    }


def _edited(source, folder, name, values):
    """A copy of the tokenizer folder SOURCE as FOLDER, its file NAME updated with VALUES."""
    import shutil
    shutil.copytree(source, folder)
    path = folder / name
    content = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({**content, **values}))
    return str(folder)


def _garbage(path):
    path.write_bytes(b"\xff\xfe not a model")
    return str(path)


def other_tokenizer(folder):
    """A tokenizer under FOLDER other than the first case's, of another vocabulary."""
    return str(Path(folder) / "hf-unigram")


def cases(folder):
    """(world size, launch line, the judge's expected exit) for each tokenizer under FOLDER."""
    f = write(folder)
    hf = ["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model"]
    sp = ["--tokenizer-model", f["sentencepiece"]]
    tiktoken = ["--tokenizer-type", "TikTokenizer", "--tokenizer-model", f["tiktoken"]]
    lines = [
        (1, hf + [f["hf-bpe"]], 0),
        (1, hf + [f["hf-bpe"], "--tokenizer-special-tokens", "<extra>", "<s>", "<extra>"], 0),
        (1, hf + [f["hf-bpe-config"]], 0),
        (1, hf + [f["hf-unigram"]], 0),
        (1, hf + [f["hf-config-tokens"]], 0),
        (1, hf + [f["hf-special-map"], "--tokenizer-special-tokens", "<mask>", "<b>"], 0),
        (1, hf + [f["hf-config-and-map"]], 0),
        (1, hf + [f["hf-wordlevel"], "--vocab-size", "7"], 0),
        (1, ["--tokenizer-type", "SentencePieceTokenizer"] + sp, 0),
        (1, ["--tokenizer-type", "GPTSentencePieceTokenizer", "--tokenizer-model",
             f["sentencepiece-bpe"]], 0),
        (1, ["--tokenizer-type", "Llama2Tokenizer", "--tokenizer-sentencepiece-legacy",
             "--tokenizer-special-tokens", "<unk>", "<new>", "<sep>", "<new>"] + sp, 0),
        (1, tiktoken + ["--vocab-size", "1500"], 0),
        (1, tiktoken + ["--vocab-size", "1200", "--tiktoken-num-special-tokens", "600"], 0),
        (1, ["--tokenizer-type", "NullTokenizer", "--vocab-size", "1001"], 0),
        # Megatron-LM pads to a multiple of 128 x tp by default.
        (2, hf + [f["hf-unigram"], "--tensor-model-parallel-size", "2",
                  "--make-vocab-size-divisible-by", "128"], 0),
        # Both refuse: too few ranks after the special tokens; a file that is no model.
        (1, tiktoken + ["--vocab-size", "2000"], 2),
        (1, ["--tokenizer-type", "SentencePieceTokenizer", "--tokenizer-model",
             f["not-a-model"]], 2),
    ]
    divisible = ["--make-vocab-size-divisible-by", "1"]
    return [(world, MODEL + line + ([] if divisible[0] in line else divisible), rc)
            for world, line, rc in lines]
