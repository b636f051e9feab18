"""Word documents (.docx), with python-docx (the `docx` extra): each paragraph's text
translated (in the body, in table cells and nested tables, in content controls, in headers and
footers), its runs' formatting kept as inline markup is (mt.document.placement), everything
else in the file left as it is.

A paragraph (`w:p`) is read as a Block, as an HTML paragraph is: the text of its runs, the
runs of one formatting (their `w:rPr`) in a row an Element, a hyperlink an Element around its
runs. The paragraph's most used formatting (in characters) is its base: text outside every
Element is written in it. What holds no text is a Leaf, put back whole at one place: a tab or
a break inside a run (a space to the model), a run of a picture, a footnote mark or a field
(from `begin` to `end`: its result is kept, not translated), a bookmark, a content control, a
tracked change, an equation. Spell-checking marks (`w:proofErr`) and Word's layout hints
(`w:lastRenderedPageBreak`) describe the old text and are dropped.

After translation the paragraph's runs are written anew from the placed text: each stretch of
text a run in the formatting of the Element around it (the base outside), hyperlinks and
leaves where placement put them; the paragraph's own properties (`w:pPr`) stay. The marks
placement puts back are private-use characters (OPEN k END, CLOSE, LEAF k END), taken out of
the text itself first, so no text can be read as one.
"""

from __future__ import annotations

import copy
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from mt.document import zip_bounds
from mt.document.markup import Block
from mt.document.placement import Element
from mt.errors import ConfigError, DataError

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
OPEN, CLOSE, LEAF, END = "\ue000", "\ue001", "\ue002", "\ue003"
MARK = re.compile(f"{OPEN}(\\d+){END}|{CLOSE}|{LEAF}(\\d+){END}")
SPACED = re.compile(f" ?({LEAF}(\\d+){END}) ?")  # a leaf, and a space on either side
DROPPED = frozenset(W + t for t in ("proofErr", "lastRenderedPageBreak"))
BREAKS = frozenset(W + t for t in ("tab", "br", "cr", "ptab"))  # a space to the model
CONTAINERS = frozenset(W + t for t in ("body", "tc", "hdr", "ftr", "sdtContent"))


def clean(text: str) -> str:
    """Text without the characters the marks are made of (how translated text is escaped)."""
    return text.translate({ord(c): None for c in (OPEN, CLOSE, LEAF, END)})


def open_docx(data: bytes, name: str = "document", checked: bool = False):
    """A python-docx Document; a ConfigError naming the extra without python-docx, a DataError
    in one line for a file that is not a .docx, a damaged one, or one past mt.document.zip_bounds
    (read before python-docx reads a part; checked: they were, when it was parsed)."""
    try:
        import docx
    except ImportError:
        raise ConfigError(".docx documents need python-docx: pip install 'mt[docx]'") from None
    if not data.startswith(b"PK"):
        raise DataError(f"{name}: not a .docx file (not a zip archive); give a Word document "
                        "(.docx, not .doc)")
    try:
        if not checked:
            zip_bounds.check(data, name)
        return docx.Document(io.BytesIO(data))
    except DataError:
        raise
    except Exception as e:  # noqa: BLE001 (a damaged zip or part: zipfile, lxml, python-docx)
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise DataError(f"{name}: a damaged .docx file ({reason}); open it in Word or "
                        "LibreOffice and save it again") from None


def paragraphs(doc) -> Iterator:
    """Every w:p with text to translate, in document order: the body's (tables and content
    controls included), then each header's and footer's, once each. Not the paragraphs of
    text boxes inside pictures (a picture is kept whole), footnotes or comments."""
    roots, seen = [doc.element.body], set()
    for section in doc.sections:
        for hf in (section.header, section.first_page_header, section.even_page_header,
                   section.footer, section.first_page_footer, section.even_page_footer):
            if not hf.is_linked_to_previous and id(hf.part) not in seen:
                seen.add(id(hf.part))
                roots.append(hf.part.element)
    for root in roots:
        yield from _paragraphs(root)


def _paragraphs(node) -> Iterator:
    for child in node:
        if child.tag == W + "p":
            yield child
        elif child.tag in (W + "tbl", W + "tr", W + "sdt") or child.tag in CONTAINERS:
            yield from _paragraphs(child)


@dataclass
class Node:
    """What a mark stands for: a run formatting (rpr), a hyperlink (its element, emptied), or a
    leaf (the element put back whole)."""

    kind: str  # "format", "link", "leaf", "break" (a leaf that stands for a space)
    element: object | None = None  # an lxml element (w:rPr for "format"; None: no formatting)
    more: list = field(default_factory=list)  # a leaf's: the elements right after it


def _key(rpr) -> bytes:
    from lxml import etree

    return b"" if rpr is None else etree.tostring(rpr)


def _text_runs(p) -> Iterator:
    """The runs whose text is read, in order (in hyperlinks too): not those of a field."""
    field = 0
    for child in p:
        runs = [child] if child.tag == W + "r" else child if child.tag == W + "hyperlink" else ()
        for r in runs:
            if r.tag == W + "r":
                chars = [c.get(W + "fldCharType") for c in r.findall(W + "fldChar")]
                in_field = field or "begin" in chars
                field += chars.count("begin") - chars.count("end")
                if not in_field:
                    yield r


def base_format(p):
    """The w:rPr most of the paragraph's characters are in (None: no formatting)."""
    chars: dict[bytes, list] = {}
    for r in _text_runs(p):
        rpr = r.find(W + "rPr")
        n = sum(len(t.text or "") for t in r.findall(W + "t"))
        entry = chars.setdefault(_key(rpr), [0, rpr])
        entry[0] += n
    if not chars:
        return None
    return max(chars.values(), key=lambda e: e[0])[1]  # the first of the most used


def read(p) -> tuple[Block, list[Node], object]:
    """A paragraph as a Block (its text, formatting and hyperlinks Elements, the rest
    Leaves), what each mark stands for, and its base formatting."""
    block, nodes = Block(), []
    base = base_format(p)
    base_key = _key(base)

    def mark(kind: str, element) -> str:
        nodes.append(Node(kind, element))
        return str(len(nodes) - 1)

    def leaf(parent: Element, element, kind: str = "leaf") -> None:
        last = block.last
        if (kind == "leaf" and last is not None and last.at == len(block.text)
                and parent.children and parent.children[-1] is last
                and nodes[int(MARK.fullmatch(last.text).group(2))].kind == "leaf"):
            # right after another leaf: put back together with it, at one place
            nodes[int(MARK.fullmatch(last.text).group(2))].more.append(element)
            return
        block.add_leaf(parent, LEAF + mark(kind, element) + END)

    def close(span: list) -> None:
        if span[0] is not None:
            span[0].end = len(block.text)
            span[0] = None

    field = 0

    def content(container: Element, children) -> None:
        nonlocal field
        span: list = [None, b""]  # the open formatting Element, and its key
        for child in children:
            if child.tag in DROPPED or child.tag == W + "pPr":
                continue
            if child.tag == W + "hyperlink" and not field:
                close(span)
                shell = copy.deepcopy(child)
                for c in list(shell):
                    shell.remove(c)
                e = Element(len(block.text), 0, OPEN + mark("link", shell) + END, CLOSE)
                container.children.append(e)
                content(e, child)
                e.end = len(block.text)
                continue
            if child.tag != W + "r":
                leaf(span[0] or container, copy.deepcopy(child))
                continue
            chars = [c.get(W + "fldCharType") for c in child.findall(W + "fldChar")]
            in_field = field or "begin" in chars
            field += chars.count("begin") - chars.count("end")
            texts = [t for t in child.findall(W + "t") if t.text]  # its own, not a picture's
            if in_field or not texts:  # a field, a picture, a mark: the whole run
                leaf(span[0] or container, copy.deepcopy(child))
                continue
            rpr = child.find(W + "rPr")
            key = _key(rpr)
            if key != span[1] or (span[0] is None and key != base_key):
                close(span)
                span[1] = key
                if key != base_key:
                    span[0] = Element(len(block.text), 0, OPEN + mark("format", rpr) + END,
                                      CLOSE)
                    container.children.append(span[0])
            parent = span[0] or container
            for c in child:
                if c.tag == W + "t":
                    block.add_text(c.text or "")
                elif c.tag in BREAKS:
                    leaf(parent, _run_of(child, c), "break")
                    block.add_text(" ")
                elif c.tag != W + "rPr" and c.tag not in DROPPED:
                    leaf(parent, _run_of(child, c))
        close(span)

    content(block.root, p)
    return block, nodes, base


def _run_of(run, child):
    """A run of run's formatting holding a copy of child alone."""
    alone = run.makeelement(W + "r", {})
    rpr = run.find(W + "rPr")
    if rpr is not None:
        alone.append(copy.deepcopy(rpr))
    alone.append(copy.deepcopy(child))
    return alone


def write(p, text: str, nodes: list[Node], base) -> None:
    """Replace p's content (all but its w:pPr) by the placed text: stretches of text as runs
    in the formatting around them, hyperlinks and leaves where the marks are."""
    for child in list(p):
        if child.tag != W + "pPr":
            p.remove(child)
    # a tab or a break was the space between its words: the space put beside it goes
    text = SPACED.sub(lambda m: m.group(1) if nodes[int(m.group(2))].kind == "break"
                      else m.group(0), text)
    stack = [(p, base)]  # (where runs go, the formatting of text there)
    pos = 0
    for m in [*MARK.finditer(text), None]:
        stretch = text[pos:m.start() if m else len(text)]
        if stretch:
            stack[-1][0].append(_run(p, stretch, stack[-1][1]))
        if m is None:
            break
        pos = m.end()
        if m.group(1) is not None:
            node = nodes[int(m.group(1))]
            if node.kind == "format":
                stack.append((stack[-1][0], node.element))
            else:
                link = copy.deepcopy(node.element)
                stack[-1][0].append(link)
                stack.append((link, stack[-1][1]))
        elif m.group(2) is not None:
            node = nodes[int(m.group(2))]
            for element in [node.element, *node.more]:
                stack[-1][0].append(copy.deepcopy(element))
        else:
            stack.pop()


def _run(p, text: str, rpr):
    r = p.makeelement(W + "r", {})
    if rpr is not None:
        r.append(copy.deepcopy(rpr))
    t = r.makeelement(W + "t", {})
    t.text = text
    if text != text.strip():
        t.set(XML_SPACE, "preserve")
    r.append(t)
    return r
