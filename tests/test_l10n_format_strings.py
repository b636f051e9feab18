"""mt.l10n.format_strings: placeholders by PO flags, what a translation keeps, accelerators."""

import pytest

from mt.l10n.format_strings import accelerator, placeholders, unkept, well_formed, with_mark


def spans(text, flags):
    return [text[a:b] for a, b in placeholders(text, flags)]


@pytest.mark.parametrize("text, flags, found", [
    ("%s of %5.2f, %1$s %ld %'d %zu done 100%%", ["c-format"],
     ["%s", "%5.2f", "%1$s", "%ld", "%'d", "%zu", "%%"]),
    ("%<PRId64> bytes", ["c-format"], ["%<PRId64>"]),
    ("%(name)s has %d files", ["python-format"], ["%(name)s", "%d"]),
    ("{name} {0} {0:>5} {{literal}}", ["python-brace-format"],
     ["{name}", "{0}", "{0:>5}", "{{", "}}"]),
    ("{count, plural, one {# file} other {# files}} left", ["java-format"],
     ["{count, plural, one {# file} other {# files}}"]),
    ("$HOME and ${var}", ["sh-format"], ["$HOME", "${var}"]),
    ("%1 of %L2", ["qt-format"], ["%1", "%L2"]),
    ("%{n} and %<n>d", ["ruby-format"], ["%{n}", "%<n>d"]),
    ("a\tb", [], ["\t"]),
    ("%s {0} $x %dkB", [], ["%s", "%dkB"[:2]]),  # no flag (msgunfmt's): printf guessed
    ("100% sure, 5% of", [], []),  # but not with the space flag
    ("%s {0}", ["no-c-format"], []),
])
def test_the_flags_pick_the_rules(text, flags, found):
    assert spans(text, flags) == found


def test_several_flags_give_each_rule_and_none_overlaps():
    text = "%(n)s {x} %d"
    assert spans(text, ["python-format", "python-brace-format"]) == ["%(n)s", "{x}", "%d"]


def test_a_translation_keeps_the_multiset_of_directives_and_the_edge_line_breaks():
    flags = ["c-format"]
    assert unkept("%s has %d files\n", "%s hat %d Dateien\n", flags) == []
    assert unkept("%s has %d files\n", "%d Dateien hat %s\n", flags) == [  # as msgfmt says
        "directives out of order or a stray %"]
    assert unkept("%1$s has %2$d files", "%2$d Dateien hat %1$s", flags) == []
    assert unkept("%s and %s", "%s und", flags) == ["-%s"]
    assert unkept("%s", "%s %d", flags) == ["+%d"]
    assert unkept("\nUsage\n", "Aufruf\n", flags) == ["leading line break"]
    assert unkept("Usage", "Aufruf\n", flags) == ["trailing line break"]
    assert unkept("{0}", "{1}", ["python-brace-format"]) == ["-{0}", "+{1}"]


@pytest.mark.parametrize("text, found", [
    ("_File", ("File", 0, "_")), ("Save _As", ("Save As", 5, "_")), ("&Open", ("Open", 0, "&")),
    ("E_xit", ("Exit", 1, "_")), ("file_name", None), ("R&D & Co", None),
    ("Tom &amp; Jerry", None), ("a_b_c", None), ("Show _Hidden Files", ("Show Hidden Files", 5,
                                                                      "_")),
])
def test_an_accelerator_mark_is_one_mark_before_a_letter(text, found):
    assert accelerator(text) == found


def test_a_mark_inside_a_placeholder_is_none():
    assert accelerator("Set $my_var", ["sh-format"]) is None


@pytest.mark.parametrize("translation, out", [
    ("Speichern _unter", "Speichern _unter"),  # the alignment's word: kept
    ("_ Datei", " _Datei"), ("Datei_", "_Datei"), ("(_) Datei", "() _Datei"),
    ("123", "123"),  # no letter: dropped
    ("Datei", "_Datei"),
])
def test_a_mark_not_before_a_letter_goes_to_the_first_letter(translation, out):
    assert with_mark(translation, "_") == out


def test_a_translation_loses_the_directives_its_source_lacks():
    assert well_formed("copy %s to %s", "kopiere %s nach %s %s") == "kopiere %s nach %s"
    assert well_formed("open %s", "%s öffnen %s") == "%s öffnen"
    assert well_formed("no directive", "kein %d hier") == "kein hier"
    assert well_formed("100%% done", "100%% fertig") == "100%% fertig"  # kept as it is
    assert well_formed("{n} files", "{n} Dateien {n}", ["python-brace-format"]) == (
        "{n} Dateien")
    # msgfmt --check: a % of no directive, and printf directives out of their arguments' order
    assert well_formed('"%s" not found', "»%«%s nicht gefunden") == "»«%s nicht gefunden"
    assert well_formed("OID %u in %s: %s", "in %s %s OID %u") == "in %u %s OID %s"
    assert well_formed("%2$s from %1$d", "%1$d von %2$s") == "%1$d von %2$s"  # numbered: free
    assert well_formed("{a} and {b}", "{b} und {a}", ["python-brace-format"]) == "{b} und {a}"
    assert well_formed("100% sure", "100 % sicher") == "100 % sicher"  # not a format string
    assert unkept("OID %u in %s", "in %s OID %u") == ["directives out of order or a stray %"]
