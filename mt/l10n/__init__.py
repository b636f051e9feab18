"""Localization files: what translators and their tools exchange, read and written back.

- `xml.py`: XML read safely (no entity is expanded, no external file read), each event with
  its byte offsets, for XLIFF and TMX.
- `languages.py`: language tags matched as localization files write them (`de` is `de-DE`).
- `xliff.py`: XLIFF 1.2 and 2.0: each segment's source and target, their inline codes, and
  where in the file a target goes.
- `tmx.py`: TMX translation memories: each unit's segments in two languages.
"""
