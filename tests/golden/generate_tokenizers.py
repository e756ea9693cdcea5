#!/usr/bin/env python3
"""Golden data for tessel's tokenizer (data/bpe_tokenizer, data/tokenizer_json,
`tessel tokenize`), computed by Hugging Face `tokenizers` itself.

Per case, tests/golden/tokenizers/<case>/:
    tokenizer.json     trained here by HF `tokenizers` on a fixed corpus
    tokenizer_config.json  bos/eos as transformers writes them
    expected.json      {"strings": [...], "ids": [[...], ...]}: HF's ids for
                       each string (Tokenizer.encode(s, add_special_tokens=False))

Cases: byte-level BPE with the GPT-2 ByteLevel split, with the Llama-3 split
regex (ignore_merges, as Llama-3 ships it) and with the Qwen2 regex (NFC
normalizer), each with special and plain added tokens; and a
SentencePiece-style Metaspace one, which tessel does not implement (its test
expects the refusal; its ids are still recorded).

Run with the Python that has `tokenizers` (see README):
    python3 tests/golden/generate_tokenizers.py            # rewrite
    python3 tests/golden/generate_tokenizers.py --check    # recompute, compare with disk
"""

import argparse
import json
import os
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from golden_files import write_or_check  # noqa: E402

OUT = os.path.join(HERE, "tokenizers")

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
          r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2 = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
         r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")

CORPUS = [
    "The quick brown fox jumps over the lazy dog. It's 12:30, isn't it? We'll see; they've gone.",
    "def add(a, b):\n    return a + b\n\nprint(add(3, 4))  # 7\n",
    "for (int i = 0; i < n; ++i) { sum += x[i] * 2; }\n",
    "Zürich, São Paulo, Kraków, İstanbul: naïve café crème brûlée.",
    "東京と大阪は日本の都市です。北京是中国的首都。서울은 한국의 수도입니다.",
    "Привет, мир! Γειά σου κόσμε. مرحبا بالعالم. שלום עולם.",
    "Emoji: 😀 😂 👍🏽 🇫🇷 👨‍👩‍👧 ❤️ ✓ ★",
    "Numbers 1234567 3.14159 -42 1e10 0x1F 2024-01-01 $1,000,000.",
    "   leading spaces, trailing   \t tabs\t\tand\n\nnewlines\r\n",
    "SHOUTING and MiXeD cAsE; I'M HERE, YOU'RE THERE, HE'S GONE.",
] * 3

STRINGS = [
    "", " ", "  ", "\n", "\t", "\r\n", " \n ", "hello", " hello", "hello ", "Hello, world!", "HELLO WORLD",
    "it's", "It'S", "they'll", "we've", "I'd", "don't", "'s", "''", "a'b'c",
    "1", "12", "123", "1234", "12345", "3.14159", "-42", "1,000,000", "٣٤٥", "Ⅻ", "½",
    "x" * 40, "ab" * 20, "  two  spaces  ", "trailing   ", "   leading", "\t\ttabs\t", "\n\n\nnewlines\n",
    "line one\nline two\r\nline three", "a \n b", "a\n\n b", " \r\n\r\n ",
    "def f(x):\n    return x * 2\n", "if (a && b) { return c; }", "x = [1, 2, 3]", "print('hi')",
    "#include <stdio.h>", "<div class=\"a\">b</div>", "SELECT * FROM t WHERE id = 3;", "a_b-c.d/e\\f",
    "naïve café", "Zürich", "Kraków", "İstanbul", "ß", "Ærø", "ÿ", "中文", "日本語のテキスト", "한국어",
    "Привет", "Γειά", "مرحبا", "שלום", "हिन्दी", "ไทย", "😀", "👍🏽", "🇫🇷", "👨‍👩‍👧", "❤️", "a😀b", " 😀 ",
    "emoji😂😂😂", "✓ done", "★★★", "\u200b", "\u00a0nbsp", "tab\u3000ideographic",
    "The quick brown fox jumps over the lazy dog.", "SHOUTING and MiXeD cAsE",
    "$1,000,000.", "2024-01-01T12:30:00Z", "0x1F", "1e10", "...", "!!!???", "--", "->", "=>", "::",
]


def case_spec(name):
    """(pre_tokenizer, normalizer, model kwargs, specials, plain added tokens)."""
    if name == "gpt2":
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), None, {}, ["<|endoftext|>"], []
    if name == "llama3":
        pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        return pre, None, {"ignore_merges": True}, ["<|begin_of_text|>", "<|end_of_text|>"], ["<tool>"]
    if name == "qwen2":
        pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
                                       pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        return pre, normalizers.NFC(), {}, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], ["<think>"]
    if name == "metaspace":
        return pre_tokenizers.Metaspace(), None, {}, ["</s>"], []
    raise ValueError(name)


CASES = ["gpt2", "llama3", "qwen2", "metaspace"]


def build(name):
    pre, norm, model_kwargs, specials, plain = case_spec(name)
    tok = Tokenizer(models.BPE(**model_kwargs))
    tok.pre_tokenizer = pre
    if norm is not None:
        tok.normalizer = norm
    byte_level = name != "metaspace"
    tok.decoder = decoders.ByteLevel() if byte_level else decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet() if byte_level else [])
    tok.train_from_iterator(CORPUS, trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in plain])
    strings = list(STRINGS) + [f"{specials[-1]}after", f"before{specials[0]} mid {specials[-1]}"]
    if plain:
        strings.append(f"call {plain[0]} now")
    ids = [tok.encode(s, add_special_tokens=False).ids for s in strings]
    config = {"bos_token": specials[0], "eos_token": specials[-1], "tokenizer_class": "PreTrainedTokenizerFast"}
    return {
        "tokenizer.json": (tok.to_str(pretty=True) + "\n").encode(),
        "tokenizer_config.json": (json.dumps(config, indent=2) + "\n").encode(),
        "expected.json": (json.dumps({"generator": "generate_tokenizers.py: tokenizers.Tokenizer.encode(s, "
                                                   "add_special_tokens=False).ids",
                                      "strings": strings, "ids": ids}, ensure_ascii=False, indent=0) + "\n").encode(),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    args = ap.parse_args()
    files = {}
    for name in CASES:
        files.update({os.path.join(name, fname): data for fname, data in build(name).items()})
    return write_or_check(OUT, files, args.check)

if __name__ == "__main__":
    sys.exit(main())
