"""The page every report shares: a title, a sticky contents bar, sections with anchors, and
filters (small inline script, no network) over rows that carry ``data-*`` attributes.

Layout rules that keep a page inside a 1280 px viewport: the body is at most 1200 px wide,
tables never grow wider than it (fixed layout where a column holds free text), and long
unbreakable text (names, digests, messages) wraps anywhere rather than overflowing.
"""

from __future__ import annotations

import html
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
th{background:#f5f5f5;text-align:left} td.n{text-align:right;font-variant-numeric:tabular-nums}
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

# Rows with data-outcome/data-runtime/data-operator follow the filters; elements with
# data-filter-op follow the operator filter only, and data-filter-rt the runtime filter only.
# A link with data-op (and data-rt) sets the filters before the page jumps to its target.
FILTER_SCRIPT = """
(function(){
var f=document.getElementById('filters');if(!f)return;
function on(name){return Array.prototype.map.call(
 f.querySelectorAll('input[name='+name+']:checked'),function(i){return i.value;});}
function all(sel,fn){Array.prototype.forEach.call(document.querySelectorAll(sel),fn);}
function apply(){
 var o=on('outcome'),r=on('runtime'),op=f.elements.operator.value,n=0;
 all('[data-outcome]',function(e){
  var show=o.indexOf(e.dataset.outcome)>=0&&r.indexOf(e.dataset.runtime)>=0&&
   (!op||e.dataset.operator===op);e.hidden=!show;if(show)n++;});
 all('[data-filter-op]',function(e){e.hidden=!!op&&e.dataset.filterOp!==op;});
 all('[data-filter-rt]',function(e){e.hidden=r.indexOf(e.dataset.filterRt)<0;});
 var s=document.getElementById('shown');if(s)s.textContent=n;}
f.addEventListener('change',apply);
f.addEventListener('reset',function(){setTimeout(apply,0);});
all('a[data-op]',function(a){a.addEventListener('click',function(){
 f.elements.operator.value=a.dataset.op;
 if(a.dataset.rt)all('#filters input[name=runtime]',function(i){i.checked=i.value===a.dataset.rt;});
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
    """The choices a page's filter bar offers: every value starts selected."""

    outcomes: Sequence[str] = ()
    runtimes: Sequence[str] = ()
    operators: Sequence[str] = ()

    def render(self) -> str:
        if not (self.outcomes or self.runtimes or self.operators):
            return ""
        options = "".join(f"<option value='{esc(op)}'>{esc(op)}</option>" for op in self.operators)
        return (
            "<form class='filters' id='filters'>"
            + _checkboxes("outcome", self.outcomes)
            + _checkboxes("runtime", self.runtimes)
            + "<label>operator <select name='operator'><option value=''>all</option>"
            + options
            + "</select></label><button type='reset'>show all</button></form>"
        )


def _checkboxes(name: str, values: Sequence[str]) -> str:
    boxes = "".join(
        f"<label><input type='checkbox' name='{name}' value='{esc(v)}' checked> {esc(v)}</label>"
        for v in values
    )
    return f"<fieldset><legend>{name}</legend>{boxes}</fieldset>"


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
