"""One paragraph through a fake model: sentences put back with their whitespace, and on a
crafted corpus of 400 lines every placeholder back byte for byte, once."""

import random
import re

import pytest
from document_fakes import every_other, identity, reversed_words, unaligned

from mt.document.paragraph import Paragraph, Settings
from mt.document.placeholders import compile_keep
from mt.records import Translation

EN = Settings("en")


def test_sentences_are_put_back_with_the_whitespace_between_them():
    text = "  One dog runs.   Two cats sleep!\tThree birds sing.\n"
    p = Paragraph(text, EN)
    assert p.inputs == ["One dog runs.", "Two cats sleep!", "Three birds sing."]
    assert not p.marked
    assert p.render(reversed_words(p.inputs)) == (
        "  RUNS. DOG ONE   SLEEP! CATS TWO\tSING. BIRDS THREE\n")


def test_a_cell_after_a_column_gap_is_put_back_at_its_column():
    """`--help` lines: the options kept whole (nothing else in their cell to translate), each
    description where it started, however long the cell before it came back; two spaces at
    least; a gap after a sentence's full stop and a tab are left as they were."""
    text = "  -v, --verbose      be verbose\n  -q, --quiet        say less\n"
    p = Paragraph(text, EN)
    assert p.inputs == ["", "be verbose", "", "say less"]
    assert p.render(reversed_words(p.inputs)) == (
        "  -v, --verbose      VERBOSE BE\n  -q, --quiet        LESS SAY\n")
    p = Paragraph("Name      Size  Owner", EN)  # cells shorter and longer than their source
    shorter = [Translation("N", 0.0, "0-0"), Translation("Größe in Bytes", 0.0, "0-0 0-1 0-2"),
               Translation("Eigentümer", 0.0, "0-0")]
    assert p.render(shorter) == "N         Größe in Bytes  Eigentümer"
    p = Paragraph("Done.  Next\tthing", EN)
    assert p.render(reversed_words(p.inputs)) == "DONE.  NEXT\tTHING"
    html = Paragraph(text, Settings("en", lines=False))  # no lines: no columns
    assert len(html.inputs) == 1 and not html.columns


def test_a_placeholder_follows_the_word_it_followed():
    p = Paragraph("We saw 42 red dogs at https://x.org today.", EN)
    assert p.inputs == ["We saw red dogs at today."]
    # reversed: TODAY. AT DOGS RED SAW WE; 42 after SAW, the URL after AT
    assert p.render(reversed_words(p.inputs)) == "TODAY. AT https://x.org DOGS RED SAW 42 WE"
    assert p.render(identity(p.inputs)) == "We saw 42 red dogs at https://x.org today."


def test_before_the_first_word_and_before_punctuation():
    p = Paragraph("{user} sent 3.", EN)
    assert p.inputs == ["sent."]
    assert p.render(identity(p.inputs)) == "{user} sent 3."


def test_a_sentence_of_placeholders_only_comes_back_as_it_was():
    p = Paragraph("https://x.org", EN)
    assert p.inputs == [""]
    assert p.render(identity(p.inputs)) == "https://x.org"


def test_a_long_sentence_is_cut_and_counted():
    text = "one two three four, five six seven eight."
    p = Paragraph(text, Settings("en", too_long=lambda s: len(s.split()) > 4))
    assert p.inputs == ["one two three four,", "five six seven eight."] and p.cut == 2
    assert p.render(identity(p.inputs)) == text


KINDS = [
    lambda r: f"https://example.org/{r.randrange(10**6)}?q={r.randrange(99)}&x=y",
    lambda r: f"www.site{r.randrange(10**4)}.com/path",
    lambda r: f"user{r.randrange(10**5)}@mail{r.randrange(99)}.example.de",
    lambda r: f"{r.randrange(1, 999)}.{r.randrange(100, 999)},{r.randrange(10, 99)} €",
    lambda r: f"{r.randrange(1, 99)} km",
    lambda r: f"{r.randrange(2, 100)}%",
    lambda r: f"{{var{r.randrange(10**4)}}}",
    lambda r: f"{{{{ item{r.randrange(10**4)} }}}}",
    lambda r: r.choice(["%s", "%d", "%(name)s", "%1$s"]),
    lambda r: f"SKU-{r.randrange(10**6):06d}",
]
WORDS = "the a dog cat runs over bridge in snow with red and sees man woman plays".split()


def crafted(n: int = 400, seed: int = 0) -> list[tuple[str, list[str]]]:
    """n lines of 4-14 words and 1-4 placeholders (each distinct in its line), some of them
    paragraphs of two sentences; each with its placeholders."""
    r = random.Random(seed)
    lines = []
    for _ in range(n):
        words = [r.choice(WORDS) for _ in range(r.randrange(4, 15))]
        kept = list(dict.fromkeys(r.choice(KINDS)(r) for _ in range(r.randrange(1, 5))))
        for k in kept:
            words.insert(r.randrange(len(words) + 1), k)
        if r.random() < 0.3:
            words.insert(r.randrange(1, len(words)), "end.")
        lines.append((" ".join(words) + r.choice([".", "!", "", "?"]), kept))
    return lines


@pytest.mark.parametrize("translate", [identity, reversed_words, every_other, unaligned])
def test_every_placeholder_comes_back_byte_for_byte_once(translate):
    keep = Settings("en", keep=compile_keep([r"SKU-\d+"]))
    corpus = crafted()
    assert len(corpus) >= 300
    for line, kept in corpus:
        p = Paragraph(line, keep)
        out = p.render(translate(p.inputs))
        for k in kept:
            assert k not in " ".join(p.inputs), (line, p.inputs)  # the model never sees it
            assert out.count(k) == line.count(k), (line, out, k)


def test_a_placeholder_whose_word_is_unaligned_follows_the_nearest_aligned_one_before():
    p = Paragraph("runs fast 42 here", EN)
    out = p.render(every_other(p.inputs))  # "runs here": "fast" (before 42) aligned to none
    assert out == "runs 42 here"
    assert re.fullmatch(r"\S+( \S+)*", out)
