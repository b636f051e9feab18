"""Messages for the user on stderr, written through tqdm so they do not break progress bars."""

import sys

from tqdm import tqdm

enabled = True  # turned off on non-zero ranks under torchrun


def info(message: str) -> None:
    if enabled:
        tqdm.write(message, file=sys.stderr)


def warn(message: str) -> None:
    if enabled:
        tqdm.write(f"warning: {message}", file=sys.stderr)
