"""Gettext PO and POT files (mt.l10n.po): each untranslated entry's msgid translated into its
msgstr (every entry's with decode.overwrite), marked `#, fuzzy` with a translator comment
naming the run, so that a reviewer sees what to check; every other byte kept. With a
translation memory (decode.memory), an entry whose msgid it holds exactly (100%) gets the
stored translation, not marked fuzzy (a person's translation; a plural entry is translated);
with decode.memory_reuse below 100, one whose closest msgid is that close gets its stored
translation marked fuzzy, as a CAT tool pre-translates, where it keeps the msgid's format
directives as `msgfmt --check` wants them (else the model translates it).

A plural entry gets every form of the target language's Plural-Forms (the file's own where it
is already for that language, else Babel's): a form used for n = 1 alone is written from the
msgid, every other from msgid_plural (it holds the count's directive, which `msgfmt --check`
wants wherever a form serves several numbers: Russian's form 0 also serves 21). The header gets
Language, Plural-Forms and charset=UTF-8 (mt writes UTF-8): a POT in gives a PO out.

Each msgid is a paragraph whose lines are its lines (a leading or trailing line break stays
where it is); its flags' format directives (mt.l10n.format_strings) are its spans: left to the
model where mt.document.settings says so (Settings.soft), taken out and put back by the word
alignment where its translation loses one (Document.harden); an accelerator mark goes on the
word aligned to the marked one (`with_mark`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from mt.document.formats import DocumentFormat
from mt.document.markup import Block
from mt.document.paragraph import Settings
from mt.document.placement import Element
from mt.l10n import po
from mt.l10n.format_strings import accelerator, placeholders, unkept, well_formed, with_mark
from mt.memory.match import Match

REUSED = "mt: translation memory, exact match"  # the translator comment of a reused entry
CLOSE = "mt: translation memory, {:.0f}% match"  # ... of a close match's, marked fuzzy


@dataclass
class Message(Block):
    """A msgid (or msgid_plural) to translate. mark: its accelerator mark, taken out of text;
    write: on an entry's last Message, what makes the entry's text from its Messages'
    translations."""

    mark: str = ""
    write: Callable[[list[str]], str] | None = None
    source: str = ""  # the msgid, mark and all: the directives its translation may hold
    flags: Sequence[str] = ()


def message(text: str, flags: Sequence[str]) -> Message:
    """text as the model reads it: without its accelerator mark, which an element around the
    marked word puts back; its directives as spans."""
    found = accelerator(text, flags)
    if found is None:
        return Message(text, Element(0, len(text)), spans=placeholders(text, flags),
                       source=text, flags=flags)
    bare, at, mark = found
    end = next((i for i in range(at, len(bare)) if bare[i].isspace()), len(bare))
    root = Element(0, len(bare), children=[Element(at, end, mark, "")])
    return Message(bare, root, spans=placeholders(bare, flags), mark=mark, source=text,
                   flags=flags)


def target_forms(catalog: po.Catalog, target: str) -> tuple[po.PluralForms, str]:
    """The plural forms to write, and the header's value for them: the file's own if it is in
    the target language already (or none is given), else the target language's."""
    own = catalog.metadata.get("Plural-Forms", "")
    lang = catalog.metadata.get("Language", "")
    same = not target or _base(lang) == _base(target)
    if own and "INTEGER" not in own and same:  # a POT's placeholder is none
        return po.parse_plural_forms(own, catalog.name), own
    forms = po.for_language(target) if target else po.GERMANIC
    return forms, str(forms)


def _base(lang: str) -> str:
    return lang.replace("-", "_").split("_")[0].lower()


def _writer(catalog: po.Catalog, entry: po.Entry, forms: po.PluralForms, comment: str
            ) -> tuple[list[Message], Callable[[list[str]], str]]:
    """An entry's Messages and what writes it back from their translations."""
    flags = entry.po.flags
    if not entry.po.msgid_plural:
        return [message(entry.po.msgid, flags)], lambda found: po.rewrite(
            catalog, entry, found, comment, fuzzy=True)
    singular = forms.singular
    texts = ([entry.po.msgid] if singular is not None else []) + [entry.po.msgid_plural]

    def write(found: list[str]) -> str:
        msgstrs = [found[0] if k == singular else found[-1] for k in range(forms.nplurals)]
        return po.rewrite(catalog, entry, msgstrs, comment, fuzzy=True)

    return [message(t, flags) for t in texts], write


def _stored(entry: po.Entry, settings: Settings) -> Match | None:
    """The memory's match whose target an entry gets as it is (settings.reuse), None for a
    plural entry and for a close match that breaks the msgid's directives (not an exact one:
    the memory holds what a person wrote for this very msgid)."""
    if entry.po.msgid_plural or settings.reuse is None:
        return None
    match = settings.reuse(entry.po.msgid)
    if match and not match.exact and unkept(entry.po.msgid, match.target, entry.po.flags):
        return None
    return match


class PoFormat(DocumentFormat):
    name = "po"
    extensions = (".po", ".pot")
    content_type = "text/x-gettext-translation; charset=utf-8"

    def settings(self, settings: Settings) -> Settings:
        return replace(settings, lines=True)  # a msgid's line breaks are its own

    def parse(self, source: str, name: str) -> tuple[list[str | Block], list[str]]:
        return self.read(source, name, Settings(""))

    def read(self, source: str, name: str, settings: Settings
             ) -> tuple[list[str | Block], list[str]]:
        """The file's text as it is but for the header and the entries to translate: the
        untranslated ones (not obsolete), or every one with settings.overwrite."""
        catalog = po.read(source, name)
        forms, plural = target_forms(catalog, settings.target)
        language = settings.target or catalog.metadata.get("Language", "")
        header = po.with_header(catalog, {"Language": language, "Plural-Forms": plural,
                                          "Content-Type": "text/plain; charset=UTF-8"})
        comment = f"mt: {settings.origin or 'a model'} (machine translation)"
        h = catalog.header
        parts: list[str | Block] = [header] if h is None else []
        done = 0
        for entry in sorted([*catalog.entries, *([h] if h else [])], key=lambda e: e.start):
            if entry is h:
                parts += [source[done:h.start], header]
                done = h.end
            if entry is h or entry.po.obsolete or (entry.translated and not settings.overwrite):
                continue
            stored = _stored(entry, settings)
            if stored is not None:  # a person's translation: exact, as it is; close, fuzzy
                parts += [source[done:entry.start], po.rewrite(
                    catalog, entry, [stored.target], REUSED if stored.exact else
                    CLOSE.format(stored.score), fuzzy=not stored.exact)]
                done = entry.end
                continue
            messages, write = _writer(catalog, entry, forms, comment)
            messages[-1].write = write
            parts += [source[done:entry.start], *messages]
            done = entry.end
        parts.append(source[done:])
        return parts, []

    def render(self, source: str, name: str, parts: Sequence[str | Block],
               pieces: Sequence[str]) -> tuple[str, bytes | None]:
        out, found = [], []
        for part, piece in zip(parts, pieces):
            if not isinstance(part, Message):
                out.append(piece)
                continue
            piece = well_formed(part.source, piece, part.flags)
            found.append(with_mark(piece, part.mark) if part.mark else piece)
            if part.write is not None:
                out.append(part.write(found))
                found = []
        return "".join(out), None


FORMAT = PoFormat()
