#!/usr/bin/env python3
"""Golden greedy generations (SPEC 11, generation) computed by Hugging Face transformers.

For every model case of tests/golden (the dense cases of generate.py and the
mixture-of-experts cases of generate_moe.py), transformers' own
AutoModelForCausalLM loads the case's config.json and model.safetensors, runs
in float64 (eager attention), and greedily generates MAX_NEW_TOKENS tokens from
each of the PROMPT_LENGTHS prompts (random ids, one prompt at a time, no stop
token) with its KV cache (`model.generate(do_sample=False)`). Written to
tests/golden/<case>/generation.json:
    prompts          the prompts' token ids (one list each)
    max_new_tokens   MAX_NEW_TOKENS
    tokens           [prompts][MAX_NEW_TOKENS] the generated ids
    logprobs         [prompts][MAX_NEW_TOKENS] log softmax(logits)[token] at each step, float64
    min_margin       the smallest gap between the largest and the second largest
                     logit over every step: a tie-free generation needs it well
                     above float32 rounding (asserted > MIN_MARGIN)
    generator        the versions that produced them

Self-checks (assertions): at every step the generated token is the argmax of a
full forward over the prompt and the tokens so far, without a cache (HF's
cached decoding agrees with its uncached forward); the window cases generate
past their sliding window; the returned scores give the same log-probs.

Run with a Python that has torch 2.x and transformers 4.51..4.x (the MoE
cases' per-expert checkpoint layout), e.g. /work/venv-golden:
    /work/venv-golden/bin/python tests/golden/generate_generation.py          # (re)write
    /work/venv-golden/bin/python tests/golden/generate_generation.py --check  # compare with disk
"""

import os
import sys

import torch
import transformers
from transformers import GenerationConfig

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from generate_logprobs import CASES, load_case, write_or_check  # noqa: E402

PROMPT_LENGTHS = [7, 3, 10]
MAX_NEW_TOKENS = 12
MIN_MARGIN = 1e-3
SEED = 4000


def generate_one(model, prompt):
    # No eos anywhere: transformers would fill None from the model's config
    # (and min_new_tokens would change the logits), so generation runs the
    # whole MAX_NEW_TOKENS on the raw argmax.
    model.generation_config.eos_token_id = None
    model.generation_config.bos_token_id = None
    config = GenerationConfig(max_new_tokens=MAX_NEW_TOKENS, do_sample=False, pad_token_id=0, use_cache=True)
    ids = torch.tensor([prompt], dtype=torch.long)
    out = model.generate(ids, generation_config=config, attention_mask=torch.ones_like(ids),
                         output_scores=True, output_logits=True, return_dict_in_generate=True)
    new = out.sequences[0, len(prompt):].tolist()
    assert len(new) == MAX_NEW_TOKENS, (len(new), new)
    logprobs, margin = [], float("inf")
    for step, token in enumerate(new):
        logits = out.logits[step][0].to(torch.float64)
        top2 = torch.topk(logits, 2).values
        margin = min(margin, float(top2[0] - top2[1]))
        logprobs.append(float(torch.log_softmax(logits, -1)[token]))
        # The same token from a full forward without a cache.
        seq = torch.tensor([prompt + new[:step]], dtype=torch.long)
        full = model(input_ids=seq, use_cache=False).logits[0, -1].to(torch.float64)
        assert int(full.argmax()) == token, (step, int(full.argmax()), token)
        # float32 rotary tables inside the float64 model: ~1e-7 apart
        assert torch.allclose(full, logits, atol=1e-6), (step, float((full - logits).abs().max()))
    return new, logprobs, margin


def build(idx, name):
    model = load_case(name)
    # The MoE cases train with the router's aux loss on; generation needs no
    # loss (and transformers' aux loss fails on a cached step's shapes).
    model.config.output_router_logits = False
    vocab = model.config.vocab_size
    window = getattr(model.config, "sliding_window", None)
    gen = torch.Generator().manual_seed(SEED + idx)
    prompts = [torch.randint(0, vocab, (n,), generator=gen).tolist() for n in PROMPT_LENGTHS]
    tokens, logprobs, margin = [], [], float("inf")
    with torch.no_grad():
        for prompt in prompts:
            new, lp, m = generate_one(model, prompt)
            tokens.append(new)
            logprobs.append(lp)
            margin = min(margin, m)
    assert margin > MIN_MARGIN, (name, margin)
    if window:
        assert max(PROMPT_LENGTHS) + MAX_NEW_TOKENS > window, (name, window)
    return {
        "case": name,
        "prompts": prompts,
        "max_new_tokens": MAX_NEW_TOKENS,
        "tokens": tokens,
        "logprobs": logprobs,
        "min_margin": margin,
        "generator": f"transformers {transformers.__version__}, torch {torch.__version__}, float64, eager "
                     "attention, greedy model.generate with its KV cache",
    }


def main():
    write_or_check(build, "generation.json",
                   lambda g: f"tokens {g['tokens'][0][:6]}..., smallest top-2 logit gap {g['min_margin']:.4f}",
                   __doc__)


if __name__ == "__main__":
    main()
