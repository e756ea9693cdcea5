#!/usr/bin/env python3
"""Golden data for the Hugging Face export (`tessel convert`, the end-of-training
export), computed by Hugging Face transformers itself: what transformers gives
for the golden models (tests/golden/<case>/) loaded in each export dtype, so a
test can check that what tessel exports from a checkpoint holding those
weights is the same model to transformers' eyes.

Writes tests/golden/export/:
    <case>.json        per case: the golden tokens and the logits of
                       AutoModelForCausalLM.from_pretrained(<case>) run in
                       float32 with every parameter rounded to D (torch's
                       round to nearest even), for D = float32 and bfloat16
    model_files/       a tokenizer trained here by HF `tokenizers` (byte-level
                       BPE, an added special token) as an HF model directory
                       holds it: tokenizer.json, tokenizer_config.json,
                       special_tokens_map.json, generation_config.json; the
                       files a run from an HF directory carries into its export
    model_files.json   the ids AutoTokenizer gives for a few strings from
                       those files

Run with the Python that has torch 2.x and transformers 4.51..4.x (see README):
    python3 tests/golden/generate_export.py            # rewrite tests/golden/export
    python3 tests/golden/generate_export.py --check    # recompute, compare with disk
    python3 tests/golden/generate_export.py --check-export DIR CASE
        # load an export with AutoModelForCausalLM (and AutoTokenizer when it
        # has tokenizer files) and compare its logits with <case>.json
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from golden_files import write_or_check  # noqa: E402

OUT = os.path.join(HERE, "export")
# Every family: tied embeddings (llama_tied, qwen2, gemma3), q/k/v biases (qwen2),
# mixture of experts (qwen3_moe with a dense middle layer, mixtral), a sliding
# window (mistral), q/k norms (qwen3, gemma3).
CASES = ["llama_tied", "qwen2", "qwen3_moe", "mixtral", "mistral", "qwen3", "gemma3"]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
TOKENIZER_TEXTS = ["What is 3 plus 4?", "  spaces\tand\ttabs  ", "naïve café ✓ 12345", "<|end|>done"]


def logits_of(model_dir, dtype, tokens):
    """The model's logits in float32 with its parameters rounded to `dtype`.
    Rounded here rather than by from_pretrained(torch_dtype=bfloat16), which
    also rounds derived buffers (Gemma3's embedding scale sqrt(hidden)) that
    are no part of the weights an export holds."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(dtype).to(torch.float32))
        return model(torch.tensor(tokens)).logits


def case_golden(case):
    golden = json.load(open(os.path.join(HERE, case, "golden.json")))
    tokens = golden["tokens"]
    out = {"case": case, "generator": "generate_export.py: transformers from_pretrained, parameters rounded "
                                      "to the dtype, run in float32", "tokens": tokens}
    for name, dtype in DTYPES.items():
        out[f"logits_{name}"] = [[[float(f"{v:.9g}") for v in row] for row in seq]
                                 for seq in logits_of(os.path.join(HERE, case), dtype, tokens).tolist()]
    return out


def write_model_files(dest):
    """A byte-level BPE tokenizer trained by HF `tokenizers` on a fixed text,
    saved with its config files as transformers saves them, plus a
    generation_config.json."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|end|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = ["What is %d plus %d? %d is the sum." % (a, b, a + b) for a in range(10) for b in range(10)]
    tok.train_from_iterator(corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|end|>")
    fast.save_pretrained(dest)
    with open(os.path.join(dest, "generation_config.json"), "w") as f:
        f.write(json.dumps({"eos_token_id": tok.token_to_id("<|end|>"), "max_new_tokens": 16,
                            "transformers_version": "4.57.6"}, indent=2) + "\n")
    ids = {t: AutoTokenizer.from_pretrained(dest)(t)["input_ids"] for t in TOKENIZER_TEXTS}
    return ids


def generate():
    files = {}
    for case in CASES:
        files[f"{case}.json"] = (json.dumps(case_golden(case), separators=(",", ":")) + "\n").encode()
    tmp = tempfile.mkdtemp()
    try:
        ids = write_model_files(tmp)
        for name in sorted(os.listdir(tmp)):
            files[os.path.join("model_files", name)] = open(os.path.join(tmp, name), "rb").read()
    finally:
        shutil.rmtree(tmp)
    files["model_files.json"] = (json.dumps(ids, indent=1, ensure_ascii=False) + "\n").encode()
    return files


def check_export(export_dir, case):
    golden = json.load(open(os.path.join(OUT, f"{case}.json")))
    config = json.load(open(os.path.join(export_dir, "config.json")))
    dtype = config["torch_dtype"]
    got = logits_of(export_dir, DTYPES[dtype], golden["tokens"])  # already rounded: unchanged
    want = torch.tensor(golden[f"logits_{dtype}"])
    diff = (got - want).abs().max().item()
    print(f"{export_dir}: transformers loads it ({dtype}); logits differ from {case}.json by at most {diff:.3g}")
    if os.path.exists(os.path.join(export_dir, "tokenizer.json")):
        tok = AutoTokenizer.from_pretrained(export_dir)
        want_ids = json.load(open(os.path.join(OUT, "model_files.json")))
        same = all(tok(t)["input_ids"] == i for t, i in want_ids.items())
        print(f"AutoTokenizer loads it: ids {'equal' if same else 'DIFFER from'} model_files.json")
        if not same:
            return 1
    return 0 if diff <= (1e-4 if dtype == "float32" else 2e-2) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    ap.add_argument("--check-export", nargs=2, metavar=("DIR", "CASE"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.check_export:
        return check_export(*args.check_export)
    return write_or_check(OUT, generate(), args.check)

if __name__ == "__main__":
    sys.exit(main())
