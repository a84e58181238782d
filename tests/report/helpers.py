"""Checks shared by the report tests: self-containment of HTML, well-formed SVG."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

_URL_ATTRS = {"src", "href", "xlink:href", "action", "formaction", "poster", "data", "srcset", "background"}


class _RefCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.refs: list[tuple[str, str, str]] = []
        self.tags: list[str] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self._in_style = tag == "style"
        for name, value in attrs:
            if name in _URL_ATTRS and value is not None:
                self.refs.append((tag, name, value))
            if name == "style" and value:
                self.styles.append(value)

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)


def external_references(html: str) -> list[str]:
    """Every reference that would make a browser fetch something outside the file."""
    p = _RefCollector()
    p.feed(html)
    bad = [f"<{t} {n}={v!r}>" for t, n, v in p.refs
           if re.match(r"^\s*(https?:|//|ftp:|file:|data:|javascript:)", v, re.I) or v.startswith("/")]
    bad += [f"<{t}>" for t in p.tags if t in ("script", "link", "img", "iframe", "object", "embed")]
    bad += [f"style: {s[:60]!r}" for s in p.styles if re.search(r"url\(|@import|@font-face", s, re.I)]
    return bad


def svgs(html: str) -> list[ET.Element]:
    """Parse every inline <svg> of an HTML page as XML (raises if one is not well-formed)."""
    return [ET.fromstring(m) for m in re.findall(r"<svg\b.*?</svg>", html, re.S)]
