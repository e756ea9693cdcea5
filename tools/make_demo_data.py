#!/usr/bin/python3
"""Writes examples/data/demo_sft.jsonl (train) and demo_sft_val.jsonl (validation).

Tiny prompt/response tasks a byte-level model with a few hundred thousand
parameters learns within a minute, so the loss falls visibly:
  addition   {"input": "12+7=", "output": "19"}
  reversal   {"input": "rev abc=", "output": "cba"}
  uppercase  {"input": "up abc=", "output": "ABC"}
The output is deterministic (fixed seed, only the standard library), and the
validation prompts never occur in the training file. Regenerate with
  /usr/bin/python3 tools/make_demo_data.py
"""
import json
import pathlib
import random

SEED = 1234
TRAIN_SIZE = 480
VAL_SIZE = 64
LETTERS = "abcdefghij"  # few symbols: a tiny model learns the mapping quickly


def make_example(rng):
    kind = rng.randrange(3)
    if kind == 0:
        a, b = rng.randrange(50), rng.randrange(50)
        return {"input": f"{a}+{b}=", "output": str(a + b)}
    word = "".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 5)))
    if kind == 1:
        return {"input": f"rev {word}=", "output": word[::-1]}
    return {"input": f"up {word}=", "output": word.upper()}


def disjoint_splits(make, rng, train_size, val_size, key):
    """train_size rows, then val_size rows whose `key` never occurs in train
    (nor twice), each drawn by make(rng)."""
    train, val, seen = [], [], set()
    for rows, size in ((train, train_size), (val, val_size)):
        while len(rows) < size:
            row = make(rng)
            if row[key] not in seen:
                seen.add(row[key])
                rows.append(row)
    return train, val


def write_jsonl(files, what):
    """files: (name, rows) pairs, written under examples/data."""
    out_dir = pathlib.Path(__file__).resolve().parent.parent / "examples" / "data"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows in files:
        with open(out_dir / name, "w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        print(f"wrote {len(rows)} {what} to {out_dir / name}")


def main():
    train, val = disjoint_splits(make_example, random.Random(SEED), TRAIN_SIZE, VAL_SIZE, "input")
    write_jsonl((("demo_sft.jsonl", train), ("demo_sft_val.jsonl", val)), "examples")


if __name__ == "__main__":
    main()
