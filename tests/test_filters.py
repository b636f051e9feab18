import pytest

from conftest import PLANTED, PLANTED_PAIRS
from mt.config import FilterConfig, load_config
from mt.errors import ConfigError
from mt.filters import PairFilter, has_control, is_copy, ratio_outlier, text_key

ALL_ON = FilterConfig(max_ratio=3, dedup=True, drop_copies=True, drop_invalid=True)
# What ALL_ON drops of the planted corpus: empty and over-long pairs are left to training's
# length filter at load, overlap to the audit.
DROPPED = {"invalid": PLANTED["invalid_utf8"] + PLANTED["control"], "copy": PLANTED["copy"],
           "ratio": PLANTED["ratio"], "duplicate": PLANTED["duplicate"]}


def dropped_lines(mask):
    return [n for n, keep in enumerate(mask, 1) if not keep]


def test_the_filters_drop_exactly_the_planted_pairs_each_under_its_reason():
    f = PairFilter(ALL_ON)
    mask = f.keep(PLANTED_PAIRS)
    assert dropped_lines(mask) == sorted(n for lines in DROPPED.values() for n in lines)
    assert f.dropped == {reason: len(lines) for reason, lines in DROPPED.items()}
    assert f.summary() == "data.filter dropped 6 of 17 pairs (2 invalid, 1 copy, 1 ratio, " \
                          "2 duplicate)"


@pytest.mark.parametrize("key, reason", [("max_ratio", "ratio"), ("dedup", "duplicate"),
                                         ("drop_copies", "copy"), ("drop_invalid", "invalid")])
def test_each_filter_alone_drops_only_its_own(key, reason):
    f = PairFilter(FilterConfig(**{key: 3 if key == "max_ratio" else True}))
    assert dropped_lines(f.keep(PLANTED_PAIRS)) == DROPPED[reason]
    assert f.dropped == {reason: len(DROPPED[reason])}


def test_dedup_keeps_the_first_occurrence_across_chunks():
    f = PairFilter(FilterConfig(dedup=True))
    mask = f.keep(PLANTED_PAIRS[:2]) + f.keep(PLANTED_PAIRS[2:5]) + f.keep(PLANTED_PAIRS[5:])
    assert mask[0] and mask[1]  # lines 1 and 2 are the first of their pairs
    assert dropped_lines(mask) == [3, 11]
    # the same pair again in a later chunk: still a duplicate
    assert f.keep([PLANTED_PAIRS[0], ("Kinder spielen .", "Kids play .")]) == [False, True]


def test_off_by_default():
    f = PairFilter(FilterConfig())
    assert not f.active
    assert f.keep(PLANTED_PAIRS) == [True] * len(PLANTED_PAIRS)
    assert not f.dropped and f.seen == len(PLANTED_PAIRS)


def test_the_rules():
    # the ratio floor: a side shorter than 3 words counts as 3
    assert not ratio_outlier("a", "b c d", 1.5)
    assert not ratio_outlier("a b", " ".join("x" * 9), 3)
    assert ratio_outlier("a b", " ".join("x" * 10), 3)
    assert ratio_outlier(" ".join("x" * 16), "a b c d e", 3)
    assert not ratio_outlier("", " ".join("x" * 50), 3)  # empty is its own finding
    assert is_copy("A  b\u00a0c ", "A b c") and not is_copy("A b", "a b") and not is_copy("", "")
    assert has_control("a\x00b") and has_control("a\x85") and has_control("a\rb")
    assert not has_control("a\tb") and not has_control("naïve\u00a0text")
    assert text_key("a  b", "c") == text_key("a b", "c\t") != text_key("a b c", "")


@pytest.mark.parametrize("value", ["0.5", "-1"])
def test_max_ratio_range_names_the_key(value):
    with pytest.raises(ConfigError, match=f"--set data.filter.max_ratio={value}: "
                                          "data.filter.max_ratio must be 0"):
        load_config(None, [f"data.filter.max_ratio={value}"])
    with pytest.raises(ConfigError, match="unknown key 'data.filter.dedupe'.*'dedup'"):
        load_config(None, ["data.filter.dedupe=true"])
