"""mt: a small, readable machine-translation training toolkit.

The Python API is `from mt import Translator` (docs/python.md). It is imported on first use, so
`import mt` (and so `mt --help`) does not load torch.
"""

__version__ = "0.1.0"
__all__ = ["Translation", "Translator", "__version__"]
_LAZY = ("Translation", "Translator")  # from mt.translator


def __getattr__(name: str):
    if name in _LAZY:
        from mt import translator

        return getattr(translator, name)
    raise AttributeError(f"module 'mt' has no attribute {name!r}")
