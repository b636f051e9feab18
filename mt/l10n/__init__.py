"""Localization files: what software translations are kept in, read for training and written
back for localizers (docs/data.md, docs/documents.md).

- `po.py`: gettext PO and POT files (polib), entries that know their place in the file's text.
- `format_strings.py`: the placeholders of a format string by its PO flags (c-format,
  python-format, ...), accelerator marks, and whether a translation keeps them.
"""
