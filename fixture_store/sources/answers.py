"""Answers from a server, checked at the door: before a value a server sent is used, stored or
shown as a fact, it must be the form it claims to be (DESIGN decisions 9 and 14: a server is
never a source of trust).

- a commit id is a full 40-hex commit (:func:`commit_problem`): an id the Hub answers for a
  commit it made or a revision it resolved, refused as the server's error, where it was said,
  not later as a registry error about a record that was written with it;
- ``Retry-After`` is delta-seconds or an HTTP-date, as RFC 9110 section 10.2.3 defines it
  (:func:`retry_after`): a negative number, a fraction or anything else is no answer at all,
  and the client's own backoff applies, said as such.

Ref names a user or a server gives are checked by git's rules
(:func:`fixture_store.registry.pins.ref_problem`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from fixture_store.registry.pins import revision_problem

_DELAY_SECONDS = re.compile(r"[0-9]+")
# An HTTP-date names its month (IMF-fixdate, RFC 850 and asctime all do); a number never does.
_MONTH = re.compile(r"(?i)\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)\b")


def commit_problem(value: object) -> str | None:
    """Why ``value`` (what a server answered as a commit id) is not a full 40-hex commit, or
    ``None`` if it is one."""
    if not isinstance(value, str):
        return f"{value!r} is not a commit id"
    return revision_problem(value)


RETRY_AFTER = "Retry-After"


def commit_id(value: object) -> str | None:
    """``value`` if it is a full 40-hex commit (what a server answered as one), else ``None``."""
    return value if isinstance(value, str) and commit_problem(value) is None else None


def retry_after_of(
    headers: Mapping[str, str] | None, *, now: datetime | None = None
) -> float | None:
    """:func:`retry_after` of the ``Retry-After`` header of an answer's ``headers``."""
    value = (headers or {}).get(RETRY_AFTER)
    return retry_after(value if isinstance(value, str) else None, now=now)


def retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """The seconds from ``now`` a ``Retry-After`` header asks to wait (an HTTP-date in the past:
    0), or ``None`` if it is missing or neither delta-seconds nor an HTTP-date."""
    if value is None:
        return None
    text = value.strip()
    if _DELAY_SECONDS.fullmatch(text):
        return float(int(text))
    if _MONTH.search(text) is None:
        return None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # asctime carries no zone: HTTP dates are in GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
