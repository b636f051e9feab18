"""Which options and outputs go together: one table, read by `mt translate` (a UsageError,
exit 2), `mt serve` (a 422) and the Translator (a ConfigError), each naming the clash its own
way (`--nbest` on the command line, `nbest` in a request).

NOT_WITH says, for each subject, what it cannot go with, in the order a message names the
first of them given; first_clash finds it. A new option that cannot go with something is one
entry here, and every caller refuses it the same way.
"""

from __future__ import annotations

from collections.abc import Mapping

NOT_WITH = {
    # the input as JSON records: each record carries its own prefix; a document is not lines
    "jsonl_input": ("prefix", "attention", "document"),
    # lines screened by their calibrated confidence: one best translation of one model a line
    "min_confidence": ("nbest", "workers", "ensemble", "align", "attention", "document"),
    # pictures of one model's cross-attention, one line a picture, plain text lines
    "attention": ("nbest", "output_format", "ensemble", "prefix", "glossary", "split", "keep",
                  "doc_format", "engine"),
    # paragraphs and documents (mt.document): a sentence has one translation, no prefix of its
    # own, and a document is translated whole by one process. Samples and alignments do go
    # with them: each sentence's first sample is used, and alignments put markup back.
    "documents": ("nbest", "prefix", "workers"),
    # processes of their own: CTranslate2 has threads of its own
    "workers": ("engine",),
}

# What only mt's own search gives (its cross-attention), not another engine (CTranslate2's):
# the option's name in a Translator call -> what a message calls it
OWN_SEARCH = {
    "attention": "attention weights",
    "align": "decode.align: word alignments",
    "confidence": "decode.confidence: the confidence features",
}


def first_clash(subject: str, given: Mapping[str, bool]) -> str | None:
    """The first of what subject cannot go with (NOT_WITH) that given holds (name -> whether
    it is given; a name not in given is not); None for none."""
    return next((name for name in NOT_WITH[subject] if given.get(name)), None)


def own_search_only(what: str) -> str:
    """The message for an output (OWN_SEARCH's) asked of an engine that is not mt's own."""
    return (f"{what} come from mt's own search (its cross-attention), not CTranslate2's; "
            "use --engine mt")
