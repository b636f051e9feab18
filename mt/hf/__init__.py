"""The Hugging Face format: Marian (OPUS-MT) models in, and out (mt import hf, mt export --to hf).

marian.py maps configs and weights both ways; files.py reads and writes a model directory
(safetensors, an optional extra: mt[hf]) and fetches one from the Hub. Nothing here imports
transformers: the tests compare against it.
"""
