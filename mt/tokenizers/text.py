"""The text rules every tokenizer shares: the whitespace rule, and escaping the one character a
tokenizer reserves, so that `detokenize(tokenize(line)) == normalize(line)` for every line."""

from __future__ import annotations

import re

MARK = "\uffed"  # ￭ joiner: no whitespace between this token and its neighbour on that side
ESCAPE = "\uffee"  # ￮ escape: inside a token, ESCAPE ESCAPE is a literal ￮, ESCAPE "m" a literal
#                    of the one character a tokenizer reserves (MARK here, ▁ in SentencePiece)


def normalize(line: str) -> str:
    """The whitespace rule: ends stripped, every run of whitespace (any `str.isspace`
    character, tabs and no-break spaces included) one plain space."""
    return " ".join(line.split())


def escape(text: str, reserved: str) -> str:
    """Text with no `reserved` character left in it (undone by `unescape`)."""
    return text.replace(ESCAPE, ESCAPE + ESCAPE).replace(reserved, ESCAPE + "m")


def unescape(text: str, reserved: str) -> str:
    """Inverse of `escape`; a stray ESCAPE (text never escaped) is kept as it is."""
    if ESCAPE not in text:
        return text
    return re.sub(f"{ESCAPE}([{ESCAPE}m])",
                  lambda m: ESCAPE if m[1] == ESCAPE else reserved, text)
