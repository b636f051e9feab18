"""Localization files: what translators and their tools exchange, read for training and
written back for localizers (docs/data.md, docs/documents.md).

- `po.py`: gettext PO and POT files (polib), entries that know their place in the file's text.
- `format_strings.py`: the placeholders of a format string by its PO flags (c-format,
  python-format, ...), accelerator marks, and whether a translation keeps them.
- `xml.py`: XML read safely (no entity is expanded, no external file read), each event with
  its byte offsets, for XLIFF and TMX.
- `languages.py`: language tags matched as localization files write them (`de` is `de-DE`).
- `xliff.py`: XLIFF 1.2 and 2.0: each segment's source and target, their inline codes, and
  where in the file a target goes.
- `tmx.py`: TMX translation memories: each unit's segments in two languages.
"""
