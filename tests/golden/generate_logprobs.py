#!/usr/bin/env python3
"""Golden log-probs (SPEC 11, get_logprobs) computed by Hugging Face transformers.

For every model case of tests/golden (one or more per supported family: the
dense cases of generate.py and the mixture-of-experts cases of
generate_moe.py), transformers' own AutoModelForCausalLM loads the case's
config.json and model.safetensors, runs in float64 (eager attention), and the
log-probs of a right-padded batch are taken from its logits:

    logprobs[b, 0] = 0
    logprobs[b, i] = log_softmax(logits[b, i - 1] / T)[tokens[b, i]]   1 <= i < length[b]
    logprobs[b, i] = 0                                                  i >= length[b]

for each temperature T of TEMPERATURES. Written to tests/golden/<case>/logprobs.json:
    input_ids      [3][12] right-padded with PAD_ID
    input_lengths  [3]     12, 9 and 4 real tokens
    temperatures   [1.0, 0.6]
    logprobs       one [3][12] table per temperature, float64
    generator      the versions that produced them

Self-checks (assertions): each row scored alone, unpadded, gives the same
log-probs (padding on the right changes nothing before it); the log-probs of a
row sum the same as an explicit log(exp / sum exp) in float64.

Run with a Python that has torch 2.x and transformers 4.51..4.x (the MoE
cases' per-expert checkpoint layout), e.g. a venv outside the repository:
    python3 -m venv /work/venv-golden
    /work/venv-golden/bin/pip install torch "transformers>=4.51,<5" safetensors
    /work/venv-golden/bin/python tests/golden/generate_logprobs.py          # (re)write
    /work/venv-golden/bin/python tests/golden/generate_logprobs.py --check  # compare with disk
"""

import argparse
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from generate import fmt_json, json_close  # noqa: E402

CASES = ["llama", "llama3_rope_scaling", "llama_tied", "mistral", "qwen2", "qwen3", "gemma3",
         "gemma3_softcap", "qwen3_moe", "qwen3_moe_sparse_step", "mixtral", "mixtral_window"]
LENGTHS = [12, 9, 4]
PAD_ID = 0
TEMPERATURES = [1.0, 0.6]
SEED = 3000


def load_case(name):
    model = AutoModelForCausalLM.from_pretrained(os.path.join(HERE, name), attn_implementation="eager",
                                                 dtype=torch.float32)
    return model.to(torch.float64).eval()


def logprobs_from_logits(logits, ids, lengths, temperature):
    logp = torch.log_softmax(logits / temperature, dim=-1)
    out = torch.zeros(ids.shape, dtype=torch.float64)
    for b, n in enumerate(lengths):
        for i in range(1, n):
            out[b, i] = logp[b, i - 1, ids[b, i]]
    return out


def build(idx, name):
    model = load_case(name)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(SEED + idx)
    seq = max(LENGTHS)
    ids = torch.full((len(LENGTHS), seq), PAD_ID, dtype=torch.long)
    for b, n in enumerate(LENGTHS):
        ids[b, :n] = torch.randint(0, vocab, (n,), generator=gen)
    with torch.no_grad():
        # No attention mask: with right padding a causal model's real positions
        # never see the padding (checked below against each row alone), and
        # transformers' eager sliding-window mask with padding gives NaN rows.
        logits = model(input_ids=ids).logits.to(torch.float64)
        tables = [logprobs_from_logits(logits, ids, LENGTHS, t) for t in TEMPERATURES]
        for b, n in enumerate(LENGTHS):  # padding on the right changes nothing before it
            alone = model(input_ids=ids[b:b + 1, :n]).logits.to(torch.float64)
            for t, table in zip(TEMPERATURES, tables):
                single = logprobs_from_logits(alone, ids[b:b + 1, :n], [n], t)
                assert torch.allclose(single[0], table[b, :n], atol=1e-10), (name, b, t)
        # The same values from an explicit log(exp(x) / sum exp(x)).
        for t, table in zip(TEMPERATURES, tables):
            x = logits / t
            for b, n in enumerate(LENGTHS):
                for i in range(1, n):
                    row = x[b, i - 1]
                    explicit = torch.log(torch.exp(row[ids[b, i]] - row.max()) / torch.exp(row - row.max()).sum())
                    assert abs(float(explicit) - float(table[b, i])) < 1e-12, (name, b, i, t)
    return {
        "case": name,
        "input_ids": ids.tolist(),
        "input_lengths": LENGTHS,
        "temperatures": TEMPERATURES,
        "logprobs": [table.tolist() for table in tables],
        "generator": f"transformers {transformers.__version__}, torch {torch.__version__}, float64, eager attention",
    }


def write_or_check(build_case, file_name, summary, description):
    """Builds every case of CASES with build_case(idx, name) and writes it to
    <case>/file_name, or with --check compares it with the file on disk
    (exit 1 naming what differs). summary(golden) is printed per case."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="recompute and compare with the files on disk")
    args = ap.parse_args()
    torch.set_num_threads(1)
    mismatched = []
    for idx, name in enumerate(CASES):
        golden = build_case(idx, name)
        path = os.path.join(HERE, name, file_name)
        if args.check:
            bad = json_close(json.load(open(path)), json.loads(fmt_json(golden))) if os.path.exists(path) else "missing"
            if bad:
                mismatched.append(f"{path} at {bad}")
        else:
            with open(path, "w") as f:
                f.write(fmt_json(golden))
        print(f"{name}: {summary(golden)}")
    if mismatched:
        print("differs from disk:\n  " + "\n  ".join(mismatched))
        sys.exit(1)


def main():
    write_or_check(build, "logprobs.json",
                   lambda g: f"sum of log-probs at T={TEMPERATURES[0]}: {sum(sum(r) for r in g['logprobs'][0]):.6f}, "
                             f"at T={TEMPERATURES[1]}: {sum(sum(r) for r in g['logprobs'][1]):.6f}",
                   __doc__)


if __name__ == "__main__":
    main()
