"""Markdown (.md): prose translated; code (fenced blocks, `inline`), link targets, images,
autolinks and front matter kept as they are; the markers of headings, list items, quotes and
tables kept in front of their text; emphasis (`**`, `*`, `_`) and a link's `[text](target)`
put back around the translated words, as inline HTML tags are (mt.document.placement).

Consecutive lines of plain text are one paragraph (Markdown runs them together); indented
code blocks are read as text (a fence keeps code safely)."""

from __future__ import annotations

import re

from mt.document.markup import Block
from mt.document.placement import Element

FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
# What starts a line: heading, list item (and its check box), quote, in any nesting.
MARKER = re.compile(r"(?:[ \t]*(?:#{1,6}[ \t]+|[-*+][ \t]+(?:\[[ xX]\][ \t]+)?|\d{1,9}[.)][ \t]+"
                    r"|>[ \t]?))+")
RULE = re.compile(r"[ \t]*(?:[-*_][ \t]*){3,}|[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*"
                  r"\|?[ \t]*|[ \t]*(?:=+|-+)[ \t]*")  # rules, table separators, underlines
INLINE = re.compile(
    r"(?P<code>`+)[^`].*?(?P=code)|!\[[^\]]*\]\([^)]*\)|<(?:https?://|mailto:)[^>\s]+>"
    r"|\[(?P<link>[^\]]+)\](?P<target>\([^)]*\)|\[[^\]]*\])"
    r"|(?P<strong>\*\*|__)(?P<s>\S(?:.*?\S)?)(?P=strong)"
    r"|(?<![\w*])(?P<em>[*_])(?P<e>[^*_\s](?:[^*_]*?[^*_\s])?)(?P=em)(?![\w*])")


def parse(source: str) -> tuple[list[str | Block], list[str]]:
    """The parts of a Markdown text: what is kept as it is, and each paragraph a Block."""
    parts: list[str | Block] = []
    lines = source.splitlines(keepends=True)
    n, fence, para = 0, "", []
    if lines and lines[0].rstrip() == "---":  # front matter: to its closing line
        end = next((k for k in range(1, len(lines)) if lines[k].rstrip() in ("---", "...")), 0)
        parts.append("".join(lines[:end + 1]))
        n = end + 1

    def flush() -> None:
        if para:
            text = "".join(para)
            body = text.rstrip("\r\n")
            parts.append(inline(body))
            parts.append(text[len(body):])
            para.clear()

    for line in lines[n:]:
        body = line.rstrip("\r\n")
        opened = FENCE.match(line)
        if fence or opened:
            flush()
            parts.append(line)
            if opened and not fence:
                fence = opened.group(1)
            elif opened and opened.group(1).startswith(fence):
                fence = ""
            continue
        marker = MARKER.match(body)
        if not body.strip() or RULE.fullmatch(body):
            flush()
            parts.append(line)
        elif marker or body.lstrip().startswith("|"):
            flush()
            _line(body, marker.end() if marker else 0, parts)
            parts.append(line[len(body):])
        else:
            para.append(line)
    flush()
    return parts, []


def _line(body: str, start: int, parts: list[str | Block]) -> None:
    """A line with a marker (kept) before its text, or a table row (its cells translated)."""
    parts.append(body[:start])
    if not body.lstrip().startswith("|"):
        parts.append(inline(body[start:]))
        return
    for k, cell in enumerate(body[start:].split("|")):
        if k:
            parts.append("|")
        text = cell.strip()
        if text:
            lead = cell[:len(cell) - len(cell.lstrip())]
            parts += [lead, inline(text), cell[len(lead) + len(text):]]
        else:
            parts.append(cell)


def inline(text: str) -> Block:
    """A Block of text with its inline Markdown as an Element tree: code and images Leaves,
    links and emphasis Elements."""
    block = Block()
    _inline(text, block, block.root)
    return block


def _inline(text: str, block: Block, parent: Element) -> None:
    pos = 0
    for m in INLINE.finditer(text):
        block.add_text(text[pos:m.start()])
        pos = m.end()
        inner = m.group("link") or m.group("s") or m.group("e")
        if inner is None:  # code, an image, an autolink: kept whole
            block.add_leaf(parent, m.group())
            continue
        if m.group("link"):
            open_, close = "[", "]" + m.group("target")
        else:
            open_ = close = m.group("strong") or m.group("em")
        e = Element(len(block.text), 0, open_, close)
        parent.children.append(e)
        _inline(inner, block, e)
        e.end = len(block.text)
    block.add_text(text[pos:])
