"""What the model must not see: found, taken out with the whitespace left once, and where."""

import time

import pytest

from mt.config import PLACEHOLDERS
from mt.document.placeholders import KINDS, compile_keep, find, mask
from mt.errors import DataError, UsageError


@pytest.mark.parametrize("text, found", [
    ("Visit https://example.org/a?b=1&c=2.", ["https://example.org/a?b=1&c=2"]),
    ("(see www.example.com/x)", ["www.example.com/x"]),
    ("Mail anna.b+x@mail.example.de, please", ["anna.b+x@mail.example.de"]),
    ("It costs 1.299,50 € or $5 for 3 km, 25% off", ["1.299,50 €", "$5", "3 km", "25%"]),
    ("Am 3. Mai kommen 10 000 Leute", ["3.", "10 000"]),
    ("{{ user }} has %s files and %(count)d in {0}, ${HOME}", [
        "{{ user }}", "%s", "%(count)d", "{0}", "${HOME}"]),
    ("No numbers in word2vec or B52s", []),
    ("  -v, --verbose      use --output[=FILE], -?, --pid <PID>", [
        "-v", "--verbose", "--output[=FILE]", "-?", "--pid <PID>"]),
    ("an e-mail, a - b, x/-y, well--said and re-run", []),
])
def test_each_kind_is_found_whole(text, found):
    assert [text[a:b] for a, b in find(text)] == found


def test_a_users_pattern_comes_first_and_others_do_not_overlap_it():
    text = "Order SKU-12345 at https://shop.example"
    keep = compile_keep([r"SKU-\d+"])
    assert [text[a:b] for a, b in find(text, keep)] == ["SKU-12345", "https://shop.example"]


def test_a_wrong_pattern_is_a_usage_error_naming_it():
    with pytest.raises(UsageError, match=r"'--keep'.*'\(' is not a regular expression"):
        compile_keep(["("])


def test_a_kind_left_to_the_model_is_not_found():
    text = "Mail a@b.org about 25 books at https://x.org"
    assert [text[a:b] for a, b in find(text)] == ["a@b.org", "25", "https://x.org"]
    assert [text[a:b] for a, b in find(text, masked=("email",))] == ["a@b.org"]
    assert [text[a:b] for a, b in find(text, masked=("url", "email"))] == [
        "a@b.org", "https://x.org"]
    assert find(text, masked=()) == []
    assert set(KINDS) == set(PLACEHOLDERS)  # decode.mask names them (mt.config)


def test_a_pattern_that_backtracks_without_end_is_a_data_error_within_its_limit():
    started = time.monotonic()
    with pytest.raises(DataError, match=r"--keep '\(a\|aa\)\+\$' ran past 1 s"):
        find("a" * 40 + "!", compile_keep(["(a|aa)+$"]))
    assert time.monotonic() - started < 10  # bounded (a loaded machine: not exactly 1 s)


@pytest.mark.parametrize("text, masked", [
    ("Visit https://x.org for more", "Visit for more"),
    ("See https://x.org.", "See."),
    ("https://x.org is it", "is it"),
    ("a 1 2 3 b", "a b"),
    ("glued{0}here", "gluedhere"),
])
def test_masking_leaves_the_whitespace_around_once(text, masked):
    m = mask(text, find(text))
    assert m.text == masked
    assert [p.text for p in m.points] == [text[a:b] for a, b in find(text)]


def test_offsets_of_the_source_map_into_the_masked_text():
    text = "Visit https://x.org for more"
    m = mask(text, find(text))
    assert m.points[0].at == 6 and m.text[6:] == "for more"
    assert m.offset(0) == 0 and m.offset(10) == 6  # inside what was taken out: where it went
    assert m.offset(text.index("more")) == m.text.index("more")


def test_a_run_written_with_no_mask_loads_with_the_mask_it_meant():
    from mt.config import config_from_dict

    assert config_from_dict({"decode": {"no_mask": "number"}}).decode.mask == "template,url,email"
    assert config_from_dict({}).decode.mask == ",".join(PLACEHOLDERS)
    # no_mask's time had four kinds: "" masked them all, not the ones added since
    assert config_from_dict({"decode": {"no_mask": ""}}).decode.mask == (
        "template,url,email,number")
