"""Where things go back: anchors among the source's words, positions in the translation, and
tags that never cross whatever the alignment says."""

from mt.document.placeholders import mask
from mt.document.placement import Anchor, Element, Layout, Leaf, Source, place, render
from mt.document.segment import Sentence


def source(text: str) -> Source:
    return Source([Sentence(0, len(text))], [mask(text, [])])


def test_an_offset_is_after_the_word_before_it_or_inside_it():
    s = source("a dog. runs")
    assert s.anchor(0) == Anchor("start", 0)
    assert s.anchor(5) == Anchor("core", 0, 1)  # between "dog" and "."
    assert s.anchor(6) == Anchor("after", 0, 1)
    assert s.anchor(11) == Anchor("end", 0)


def test_a_span_covers_the_words_it_overlaps_and_says_whether_whole():
    s = source("a big dog.")
    assert s.covered(2, 9) == ([(0, 1), (0, 2)], True, False)  # "big dog" without "."
    assert s.covered(2, 10) == ([(0, 1), (0, 2)], True, True)


def render_with(text, target, links, root):
    layout = Layout([target.split()], [links])
    return render(layout, ["", ""], place(root, source(text), layout), str)


def test_a_child_aligned_outside_its_parent_is_kept_inside_it():
    # source: x <b>y <i>z</i></b>; target: Z X Y (z aligned first: outside b's Y)
    text = "x y z"
    i = Element(4, 5, "<i>", "</i>")
    b = Element(2, 5, "<b>", "</b>", [i])
    out = render_with(text, "Z X Y", [2, 0, 1], Element(0, 5, children=[b]))
    assert out == "<b><i>Z</i> X Y</b>"


def test_siblings_may_swap_but_never_overlap():
    text = "p q r"
    one = Element(0, 3, "<b>", "</b>")  # "p q"
    two = Element(2, 5, "<i>", "</i>")  # "q r": overlaps one on the target side
    out = render_with(text, "P Q R", [0, 1, 2], Element(0, 5, children=[one, two]))
    assert out == "<b>P Q</b><i> R</i>"  # i starts where b ends: its space inside
    out = render_with("p q", "Q P", [1, 0], Element(0, 3, children=[
        Element(0, 1, "<b>", "</b>"), Element(2, 3, "<i>", "</i>")]))
    assert out == "<i>Q</i> <b>P</b>"


def test_an_element_aligned_to_nothing_is_left_empty_where_it_began():
    out = render_with("p q", "P", [0], Element(0, 3, children=[Element(2, 3, "<b>", "</b>")]))
    assert out == "P<b></b>"


def test_a_leaf_goes_before_trailing_punctuation_with_its_spaces():
    text = "he has."
    leaf = Leaf(6, "42", Anchor("core", 0, 1), space_before=True, space_after=False)
    out = render_with(text, "er hat.", [0, 1], Element(0, 7, children=[leaf]))
    assert out == "er hat 42."
