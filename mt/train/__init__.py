"""Training: the loop and the small pieces it calls."""
