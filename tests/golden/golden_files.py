"""Writing a generator's golden files, or (--check) comparing them with the
files on disk byte for byte; shared by generate_export.py and
generate_tokenizers.py."""

import os


def write_or_check(out_dir, files, check):
    """`files`: relative path -> bytes. Returns the exit status: 1 when a
    checked file is missing or differs (each is printed), else 0."""
    bad = []
    for name, data in files.items():
        path = os.path.join(out_dir, name)
        if check:
            if not os.path.exists(path) or open(path, "rb").read() != data:
                bad.append(path)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        print(f"wrote {path} ({len(data) // 1024} KiB)")
    for path in bad:
        print(f"differs: {path}")
    return 1 if bad else 0
