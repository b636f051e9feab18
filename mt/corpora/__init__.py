"""Public corpora and test sets, where they are published and how their files are read: OPUS's
training corpora (opus.py), the test sets sacreBLEU knows, with FLORES-200 (testsets.py), and
the installed software's translations (software.py).
`mt data` (mt.commands.data) fetches them and writes what they hold as plain files; Multi30k,
which needs neither, is there alone. docs/data.md#public-corpora-and-test-sets."""


def language_pair(pair: str) -> tuple[str, str]:
    """"de-en" -> ("de", "en"); ValueError if it is not two codes joined by one hyphen."""
    src, sep, tgt = pair.partition("-")
    if not (sep and src and tgt) or "-" in tgt:
        raise ValueError(pair)
    return src, tgt
