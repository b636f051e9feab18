"""The placeholders of a format string, by the format flags of its PO entry.

A PO entry's flags (`#, c-format`, `python-format`, ...) say which language reads its msgid
as a format string; gettext's `msgfmt --check` then requires the translation to have the same
directives. `placeholders` gives their spans (the document pipeline keeps them from the model
and puts them back by the word alignment, mt.document.placeholders); `unkept` says which a
translation lost or added; `accelerator` finds a menu label's mark (`_File`, `&Open`).

Rules, by flag (FLAGS; gettext's other flags of the same syntax share them):
- printf (`c-format` and kin): `%s`, `%5.2f`, `%1$s`, `%ld`, `%'d`, `%%`, `%<PRId64>`;
- `python-format`: `%(name)s` and printf's;
- braces (`python-brace-format` and kin): `{name}`, `{0}`, `{0:>5}`, `{{`, and an ICU message
  (`{count, plural, one {# file} other {# files}}`) kept whole: braces balanced by the `regex`
  package's recursion;
- `sh-format`: `$var`, `${var}`; `qt-format`, `kde-format`: `%1`; `ruby-format`: `%{name}`,
  `%<name>s`; `lisp-format`, `scheme-format`: `~a`.
An entry with no format flag at all (`msgunfmt` drops them: a .mo file keeps none) is read as
printf, as xgettext guesses `c-format`, less the space flag (`100% sure` is no `% s`). Tabs and
other control characters but the line break are kept where they are in every entry.
Line breaks are the paragraph's lines (mt.document keeps them where they are, a leading or a
trailing one too: `msgfmt --check` requires that).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

import regex

PRINTF = (r"%(?:\d+\$)?[-+ 0#'I]*(?:\d+|\*(?:\d+\$)?)?(?:\.(?:\d+|\*(?:\d+\$)?))?"
          r"(?:hh|ll|[hlLqjzZt])?[diouxXeEfFgGaAcsCSpnm%]|%<PRI\w+>")
PYTHON = r"%\(\w+\)[-+ 0#]*(?:\d+|\*)?(?:\.(?:\d+|\*))?[diouxXeEfFgGcrsa%]|" + PRINTF
BRACES = r"\{\{|\}\}|(?P<braces>\{(?:[^{}]|(?&braces))*\})"
SHELL = r"\$\{\w+\}|\$\w+"
QT = r"%L?\d{1,2}"
RUBY = r"%\{\w+\}|%<\w+>[-+ 0#]*\d*(?:\.\d+)?[a-zA-Z]|" + PRINTF
LISP = r"~[\d,']*[:@]*[aAsSdDbBoOxXrRpPcCfFeEgG$%&|~*?^(){}\[\];<>]"
CONTROL = r"[\t\x0b\x0c\r\x00-\x08\x0e-\x1f\x7f]"

# A PO flag -> the rule of its format strings (gettext's manual, "Special Comments")
FLAGS: dict[str, regex.Pattern] = {}
for _names, _rule in [
    ("c objc gcc-internal gfc-internal awk lua php perl tcl javascript object-pascal go "
     "java-printf", PRINTF),
    ("python", PYTHON),
    ("python-brace perl-brace rust csharp java", BRACES),
    ("sh", SHELL),
    ("qt qt-plural kde kde-kuit smalltalk ycp", QT),
    ("ruby", RUBY),
    ("lisp scheme elisp librep", LISP),
]:
    FLAGS.update({f"{n}-format": regex.compile(_rule, regex.V1) for n in _names.split()})
CONTROLS = regex.compile(CONTROL)
GUESSED = regex.compile(PRINTF.replace("[-+ 0#'I]", "[-+0#'I]"))  # no flag: as printf, no space
PRINTFS = {FLAGS["c-format"], FLAGS["python-format"], FLAGS["ruby-format"]}  # `%` directives

# An accelerator mark: `_` (GTK) or `&` (Qt, KDE) before a letter at a word's start (`_File`,
# `Save _As`, `&Open`, not `&amp;`), or inside the word of a short capitalized label (`E_xit`)
MARK_AT_START = re.compile(r"(?<![\w&])([_&])(?=[^\W\d_])(?!\w+;)")
MARK_INSIDE = re.compile(r"(?<=[^\W\d_])([_&])(?=[^\W\d_])")
LABEL_WORDS = 3  # a label this short may carry its mark inside a word
LETTER = re.compile(r"[^\W\d_]")


def rules(flags: Iterable[str]) -> list[regex.Pattern]:
    """The rules of the format flags among flags (`no-c-format` and others: none); printf's,
    less the space flag, where no flag names a format (GUESSED)."""
    flags = list(flags)
    if not any(f.endswith("-format") for f in flags):
        return [GUESSED]
    return list(dict.fromkeys(FLAGS[f] for f in flags if f in FLAGS))


def placeholders(text: str, flags: Iterable[str] = ()) -> list[tuple[int, int]]:
    """The (start, end) of each placeholder of text by its flags' rules, and of each control
    character (a tab), in order, none overlapping another (an earlier rule's wins)."""
    found: list[tuple[int, int]] = []
    for rule in [*rules(flags), CONTROLS]:
        for m in rule.finditer(text):
            a, b = m.span()
            if b > a and not any(a < e and s < b for s, e in found):
                found.append((a, b))
    return sorted(found)


def _directive_spans(text: str, flags: Iterable[str]) -> list[tuple[int, int]]:
    """The (start, end) of text's format directives: its placeholders but control characters."""
    return [(a, b) for a, b in placeholders(text, flags) if not CONTROLS.fullmatch(text[a:b])]


def directives(text: str, flags: Iterable[str]) -> Counter[str]:
    """The multiset of text's format directives (its placeholders but control characters)."""
    return Counter(text[a:b] for a, b in _directive_spans(text, flags))


def unkept(source: str, translation: str, flags: Iterable[str] = ()) -> list[str]:
    """What a translation does not keep of its source's format string, as gettext's
    `msgfmt --check` would object to it: each directive it lacks (`-%s`) or adds (`+%d`), and
    a line break at the start or end that only one of them has. [] when it keeps them all."""
    flags = list(flags)
    want, got = directives(source, flags), directives(translation, flags)
    out = [f"-{d}" for d in sorted((want - got).elements())]
    out += [f"+{d}" for d in sorted((got - want).elements())]
    if not out:
        if well_formed(source, translation, flags) != translation:
            out.append("directives out of order or a stray %")
    for where, has in (("leading", str.startswith), ("trailing", str.endswith)):
        if has(source, "\n") != has(translation, "\n"):
            out.append(f"{where} line break")
    return out


def _sequential(found: str) -> bool:
    """A printf directive taken in turn (not `%2$s`, not `%(name)s`, not `%%`): its place in
    the string is its argument's."""
    return found != "%%" and found.startswith("%") and not regex.match(r"%(\d+\$|\()", found)


def _printf(source: str, flags: list[str]) -> bool:
    """Whether source is read as printf by its flags and holds a directive: a `%` of its
    translation is then a directive's or an error."""
    return bool(set(rules(flags)) & {GUESSED, *PRINTFS}) and bool(directives(source, flags))


def well_formed(source: str, translation: str, flags: Iterable[str] = ()) -> str:
    """translation made a format string msgfmt takes for source's (the directives the
    document pipeline put back are source's, but the model writes its own too):
    - the directives it holds more of than source lose the last of each (and the space before);
    - a `%` of no directive goes, where source is a printf string;
    - printf directives taken in turn stand in source's order (the places stay, as the
      alignment put them): their order is their arguments'."""
    flags = list(flags)
    spans = _directive_spans(translation, flags)
    surplus = Counter(translation[a:b] for a, b in spans) - directives(source, flags)
    drop = []
    for a, b in reversed(spans):
        if surplus[translation[a:b]] > 0:
            surplus[translation[a:b]] -= 1
            drop.append((a - (a > 0 and translation[a - 1] == " "), b))
    if _printf(source, flags):
        inside = [False] * len(translation)
        for a, b in spans:
            inside[a:b] = [True] * (b - a)
        drop += [(i, i + 1) for i, c in enumerate(translation) if c == "%" and not inside[i]]
    for a, b in sorted(drop, reverse=True):  # from the end: the offsets before each stay good
        translation = translation[:a] + translation[b:]
    return _in_order(source, translation, flags)


def _in_order(source: str, translation: str, flags: list[str]) -> str:
    want = [source[a:b] for a, b in _directive_spans(source, flags) if _sequential(source[a:b])]
    spans = [(a, b) for a, b in _directive_spans(translation, flags)
             if _sequential(translation[a:b])]
    have = [translation[a:b] for a, b in spans]
    if have == want or Counter(have) != Counter(want):
        return translation
    for (a, b), text in sorted(zip(spans, want, strict=True), reverse=True):
        translation = translation[:a] + text + translation[b:]
    return translation


def accelerator(text: str, flags: Iterable[str] = ()) -> tuple[str, int, str] | None:
    """A label's accelerator mark: (text without it, the offset there of the letter it marked,
    the mark), or None. One mark alone counts: a text with two candidates (`a_b_c`, `R&D &
    Co`) or a mark inside a placeholder (`$my_var`) has none."""
    held = placeholders(text, flags)
    starts = [m.start() for m in MARK_AT_START.finditer(text)]
    inside = [m.start() for m in MARK_INSIDE.finditer(text)]
    if len(text.split()) <= LABEL_WORDS and text[:1].isupper():
        starts += inside
    marks = [a for a in starts if not any(s <= a < e for s, e in held)]
    if len(marks) != 1 or text.count(text[marks[0]]) != 1:
        return None
    at = marks[0]
    return text[:at] + text[at + 1:], at, text[at]


def with_mark(translation: str, mark: str) -> str:
    """A translation where the alignment put the mark: kept if a letter follows it, else moved
    before the translation's first letter (dropped if it has none). The convention: the mark
    goes on the word that translates the marked word, so the key still means that word; a
    translation aligned to nothing gets the first letter, as translators do by default."""
    at = translation.find(mark)
    if at >= 0 and LETTER.match(translation, at + 1):
        return translation
    bare = translation if at < 0 else translation[:at] + translation[at + 1:]
    first = LETTER.search(bare)
    return bare if first is None else bare[:first.start()] + mark + bare[first.start():]
