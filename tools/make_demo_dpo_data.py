#!/usr/bin/python3
"""Writes examples/data/demo_dpo.jsonl (train) and demo_dpo_val.jsonl (validation).

Preference pairs over the tiny tasks of the demo SFT set (make_demo_data.py),
each a prompt, the right answer (chosen) and a wrong one (rejected) that a
byte-level model can tell apart from the text alone:
  addition   {"prompt": "12+7=", "chosen": "19", "rejected": "21"}     (off by 1..5)
  reversal   {"prompt": "rev abc=", "chosen": "cba", "rejected": "abc"} (not reversed)
  uppercase  {"prompt": "up abc=", "chosen": "ABC", "rejected": "abc"}  (not uppercased)
Deterministic (fixed seed, only the standard library); the validation prompts
never occur in the training file. Regenerate with
  /usr/bin/python3 tools/make_demo_dpo_data.py
"""
import random

from make_demo_data import LETTERS, disjoint_splits, write_jsonl

SEED = 4321
TRAIN_SIZE = 256
VAL_SIZE = 64


def make_pair(rng):
    kind = rng.randrange(3)
    if kind == 0:
        a, b = rng.randrange(50), rng.randrange(50)
        wrong = a + b + rng.choice([-5, -4, -3, -2, -1, 1, 2, 3, 4, 5])
        return {"prompt": f"{a}+{b}=", "chosen": str(a + b), "rejected": str(abs(wrong))}
    word = "".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 5)))
    while word == word[::-1]:
        word = "".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 5)))
    if kind == 1:
        return {"prompt": f"rev {word}=", "chosen": word[::-1], "rejected": word}
    return {"prompt": f"up {word}=", "chosen": word.upper(), "rejected": word}


def main():
    train, val = disjoint_splits(make_pair, random.Random(SEED), TRAIN_SIZE, VAL_SIZE, "prompt")
    write_jsonl((("demo_dpo.jsonl", train), ("demo_dpo_val.jsonl", val)), "pairs")


if __name__ == "__main__":
    main()
