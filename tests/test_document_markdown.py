"""Markdown: prose translated, code, link targets and front matter kept, markers before their
text, emphasis and links put back around the aligned words."""

from document_fakes import identity, reversed_words

from mt.document import Document
from mt.document.markdown import parse
from mt.document.markup import Block
from mt.document.paragraph import Settings

MD = """---
title: A page
---
# A **big** title

Some text with `x = 1` and a [link here](https://x.org/a_b "T") and
a second line with *emphasis* and ![a picture](a.png).

- item one
  - [ ] task two
> 1. quoted first

```python
keep   this = "as it is"
```

| head | other |
|---|:-:|
| cell one | cell two |
***
"""


def blocks(text):
    return [p.text for p in parse(text)[0] if isinstance(p, Block)]


def test_prose_is_translated_and_code_front_matter_and_markers_are_not():
    assert blocks(MD) == [
        "A big title", "Some text with  and a link here and\na second line with emphasis "
        "and.", "item one", "task two", "quoted first", "head", "other", "cell one",
        "cell two"]


def test_the_words_kept_come_back_as_they_were():
    doc = Document(MD, "md", Settings("en"))
    assert doc.render(identity(doc.inputs)).text == MD.replace(
        " and\na second", " and a second")  # a paragraph's soft line break: a space


def test_emphasis_and_links_follow_their_words():
    doc = Document("We saw a **big** dog and [this link](https://x.org) now.\n", "md",
                   Settings("en"))
    assert doc.render(reversed_words(doc.inputs)).text == (
        "NOW. [LINK THIS](https://x.org) AND DOG **BIG** A SAW WE\n")
