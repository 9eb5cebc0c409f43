"""What a generated HTML page holds, read with the standard library's parser: its ids, links,
elements by attribute, and whether anything in it would be fetched."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import unquote

# Attributes whose URL a browser fetches or follows.
_URL_ATTRS = ("src", "href", "action", "poster", "data", "srcset")


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    within: tuple[str, ...] = ()  # the tags of its ancestors
    text: str = ""


@dataclass
class Page(HTMLParser):
    elements: list[Element] = field(default_factory=list)
    _open: list[Element] = field(default_factory=list)

    def __post_init__(self) -> None:
        HTMLParser.__init__(self, convert_charrefs=True)

    @classmethod
    def parse(cls, text: str) -> Page:
        page = cls()
        page.feed(text)
        page.close()
        return page

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        within = tuple(e.tag for e in self._open)
        element = Element(tag, {k: v or "" for k, v in attrs}, within)
        self.elements.append(element)
        if tag not in ("br", "meta", "input", "col", "img", "link", "hr", "source"):
            self._open.append(element)

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self._open.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        for element in self._open:
            element.text += data

    @property
    def ids(self) -> set[str]:
        return {e.attrs["id"] for e in self.elements if "id" in e.attrs}

    def with_attr(self, name: str, tag: str | None = None) -> list[Element]:
        return [e for e in self.elements if name in e.attrs and (tag is None or e.tag == tag)]

    def fragments(self, within: str | None = None) -> list[str]:
        """The targets of same-page links (``#id``), unquoted; only inside ``<within>`` if given."""
        scope = [e for e in self.elements if within is None or within in e.within]
        return [
            unquote(e.attrs["href"].split("#", 1)[1])
            for e in scope
            if e.tag == "a" and e.attrs.get("href", "").startswith("#")
        ]

    def remote_urls(self) -> list[str]:
        """Every URL the page would fetch or follow off this machine (a scheme other than
        file/data, or a scheme-relative '//host' one)."""
        urls = [e.attrs[a] for e in self.elements for a in _URL_ATTRS if a in e.attrs]
        return [
            u
            for u in urls
            if u.startswith("//") or ("://" in u.split("#")[0] and not u.startswith("file:"))
        ]
