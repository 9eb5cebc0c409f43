"""The page every report shares: a title, a sticky contents bar, sections with anchors, and
filters (small inline script, no network) over rows that carry ``data-*`` attributes.

Layout rules that keep a page inside a 1280 px viewport: the body is at most 1200 px wide,
tables never grow wider than it (fixed layout where a column holds free text), and long
unbreakable text (names, digests, messages) wraps anywhere rather than overflowing.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import quote

STYLE = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;padding:0 1.5em 2em;color:#222;
max-width:1200px}
h1{font-size:1.5em;margin:.6em 0 .3em} h2{font-size:1.2em;margin-top:1.6em;
border-bottom:1px solid #ddd;scroll-margin-top:6em} h3{font-size:1.05em;scroll-margin-top:6em}
table{border-collapse:collapse;margin:.5em 0;max-width:100%}
td,th{padding:3px 8px;border:1px solid #ddd;vertical-align:top;overflow-wrap:anywhere}
th{background:#f5f5f5;text-align:left;overflow-wrap:normal}
td.n{text-align:right;font-variant-numeric:tabular-nums} td.name{overflow-wrap:normal}
table.wide{width:100%;table-layout:fixed}
tr{scroll-margin-top:6em}
.full{background:#c8e6c9} .part{background:#fff3c4} .none{background:#ffcdd2}
.bar{display:inline-block;height:12px;background:#5c6bc0;vertical-align:middle}
.dot{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px}
code,pre{font:12px ui-monospace,monospace;overflow-wrap:anywhere}
pre{white-space:pre-wrap;margin:0}
details{margin:.3em 0} .muted{color:#666}
nav.contents{position:sticky;top:0;z-index:1;background:#fafafa;border-bottom:1px solid #ddd;
padding:.4em 0;display:flex;flex-wrap:wrap;gap:.3em 1em;align-items:center}
nav.contents a{text-decoration:none} nav.contents a:hover{text-decoration:underline}
form.filters{display:flex;flex-wrap:wrap;gap:.2em 1em;align-items:center;font-size:13px;
width:100%;margin:0}
form.filters fieldset{border:0;padding:0;margin:0;display:flex;flex-wrap:wrap;gap:0 .6em}
form.filters legend{float:left;font-weight:600;margin-right:.4em}
form.filters select{max-width:16em}
.chips{display:flex;flex-wrap:wrap;gap:4px}
.chip{border:1px solid #ddd;border-radius:3px;padding:1px 6px;background:#f1f8e9;
font-size:12px}
svg{max-width:100%;height:auto}
"""

# A filter is a group of checkboxes or a select, named after the data-* attribute it reads.
# Rows (data-row) show when every filter allows their value; an element with data-only="NAME"
# and data-value shows when filter NAME allows its value. A link with data-set='{"NAME": value}'
# sets the filters before the page jumps to its target.
FILTER_SCRIPT = """
(function(){
var f=document.getElementById('filters');if(!f)return;
function each(sel,fn){Array.prototype.forEach.call(document.querySelectorAll(sel),fn);}
function allowed(){var a={};
 each('#filters input[type=checkbox]',function(i){a[i.name]=a[i.name]||[];
  if(i.checked)a[i.name].push(i.value);});
 each('#filters select',function(s){a[s.name]=s.value?[s.value]:null;});return a;}
function ok(a,k,v){return !a[k]||a[k].indexOf(v)>=0;}
function apply(){var a=allowed(),n=0;
 each('[data-row]',function(e){var show=Object.keys(a).every(function(k){
  return ok(a,k,e.getAttribute('data-'+k));});e.hidden=!show;if(show)n++;});
 each('[data-only]',function(e){e.hidden=!ok(a,e.dataset.only,e.dataset.value);});
 each('.shown',function(s){s.textContent=n;});}
f.addEventListener('change',apply);
f.addEventListener('reset',function(){setTimeout(apply,0);});
each('a[data-set]',function(l){l.addEventListener('click',function(){
 var want=JSON.parse(l.dataset.set);Object.keys(want).forEach(function(k){
  each('#filters select[name='+k+']',function(s){s.value=want[k];});
  each('#filters input[name='+k+']',function(i){i.checked=i.value===want[k];});});
 apply();});});
apply();
})();
"""


@dataclass(frozen=True)
class Section:
    """One part of a page: its anchor, its heading (also its entry in the contents bar)."""

    anchor: str
    title: str
    body: str


@dataclass(frozen=True)
class Filters:
    """A page's filter bar: checkbox groups and selects, each ``(name, values)``; every value
    starts allowed. ``name`` is the data-* attribute of the rows it filters."""

    checks: Sequence[tuple[str, Sequence[str]]] = ()
    selects: Sequence[tuple[str, Sequence[str]]] = ()

    def render(self) -> str:
        groups = "".join(_checkboxes(name, values) for name, values in self.checks if values)
        selects = "".join(_select(name, values) for name, values in self.selects if values)
        if not (groups or selects):
            return ""
        return (
            f"<form class='filters' id='filters'>{groups}{selects}"
            "<button type='reset'>show all</button></form>"
        )


def _checkboxes(name: str, values: Sequence[str]) -> str:
    boxes = "".join(
        f"<label><input type='checkbox' name='{esc(name)}' value='{esc(v)}' checked> "
        f"{esc(v)}</label>"
        for v in values
    )
    return f"<fieldset><legend>{esc(name)}</legend>{boxes}</fieldset>"


def _select(name: str, values: Sequence[str]) -> str:
    options = "".join(f"<option value='{esc(v)}'>{esc(v)}</option>" for v in values)
    return (
        f"<label>{esc(name)} <select name='{esc(name)}'><option value=''>all</option>"
        f"{options}</select></label>"
    )


def row_attrs(**values: str) -> str:
    """The attributes of a row the filters narrow: ``data-row`` and one data-* per filter."""
    return "data-row " + " ".join(f"data-{k}='{esc(v)}'" for k, v in values.items())


def only(name: str, value: str) -> str:
    """The attributes of an element shown only while filter ``name`` allows ``value``."""
    return f"data-only='{esc(name)}' data-value='{esc(value)}'"


def setting(**values: str) -> str:
    """The attributes of a link that sets the filters to ``values`` when followed."""
    return f"data-set='{esc(json.dumps(values, sort_keys=True))}'"


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def href(anchor: str, page: str = "") -> str:
    """A link to ``anchor`` (an id; names may hold '/', ':' and '.') on ``page``."""
    return esc(f"{quote(page)}#{quote(anchor, safe='/:@')}")


def contents(sections: Iterable[Section], extra: Iterable[tuple[str, str]] = ()) -> str:
    links = [f"<a href='{esc(url)}'>{esc(label)}</a>" for label, url in extra]
    links += [f"<a href='{href(s.anchor)}'>{esc(s.title)}</a>" for s in sections]
    return "".join(links)


def render(
    title: str,
    intro: str,
    sections: Sequence[Section],
    *,
    filters: Filters | None = None,
    links: Sequence[tuple[str, str]] = (),
) -> str:
    """The whole page: head, heading, contents bar (with the filters), sections."""
    bar = contents(sections, links) + (filters.render() if filters else "")
    body = "".join(f"<h2 id='{esc(s.anchor)}'>{esc(s.title)}</h2>{s.body}" for s in sections)
    script = f"<script>{FILTER_SCRIPT}</script>" if filters else ""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1 id='top'>{esc(title)}</h1>{intro}<nav class='contents'>{bar}</nav>"
        f"{body}{script}</body></html>\n"
    )
