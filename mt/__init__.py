"""mt: a small, readable machine-translation training toolkit."""

__version__ = "0.1.0"
