"""Why training stops."""

from __future__ import annotations


class Stop(Exception):
    """Raised inside the loop to end training early (early stopping, signal, step limit)."""
