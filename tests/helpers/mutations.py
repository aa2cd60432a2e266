"""Random mutations of valid landing lines: what a producer might send by mistake."""

from __future__ import annotations

import random

TOKENS = [
    "null",
    "true",
    "false",
    '""',
    '"x"',
    '"NaN"',
    "NaN",
    "-Infinity",
    "0",
    "-1",
    "1.5",
    "7",
    "1e2",
    "1e400",
    "99999999999",
    "9223372036854775808",
    "[1]",
    "{}",
    '"2026-11-23T14:30:00Z"',
    '"2026-02-30T00:00:00Z"',
    '"BUY"',
    '"SELL"',
    '"AAPL"',
    '"seven"',
    "0.000000001",
    "-0.0",
    "12345678901234567890123456789012",
]
CHARS = list('{}[]",:. \t\\-+e0123456789aNx') + ["\u00e9"]


def mutations(rng: random.Random, valid: list[str], n: int) -> list[str]:
    """Lines a producer might send by mistake: a field's value replaced, a field dropped or doubled,
    a character inserted, deleted or changed, the line cut short."""
    out = []
    for _ in range(n):
        line = rng.choice(valid)
        how = rng.randrange(5)
        if how == 0:  # one value replaced by a token
            parts = line[1:-1].split(", ")
            k = rng.randrange(len(parts))
            key = parts[k].split(": ", 1)[0]
            parts[k] = f"{key}: {rng.choice(TOKENS)}"
            line = "{" + ", ".join(parts) + "}"
        elif how == 1:  # a field dropped, or given twice
            parts = line[1:-1].split(", ")
            k = rng.randrange(len(parts))
            parts = parts[:k] + parts[k + 1 :] if rng.random() < 0.7 else parts + [parts[k]]
            line = "{" + ", ".join(parts) + "}"
        elif how == 2:  # a character inserted
            at = rng.randrange(len(line) + 1)
            line = line[:at] + rng.choice(CHARS) + line[at:]
        elif how == 3:  # a character deleted or changed
            at = rng.randrange(len(line))
            line = line[:at] + (rng.choice(CHARS) if rng.random() < 0.5 else "") + line[at + 1 :]
        else:  # cut short
            line = line[: rng.randrange(1, len(line))]
        out.append(line)
    return out
