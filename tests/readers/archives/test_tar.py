"""The tar walk: every hostile tar case (plain, lz4, zstd) is refused and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.archive_corpus import CASES, TAR_FORMATS, Case, assert_refused, case_id

TAR_CASES = [c for c in CASES if c.fmt in TAR_FORMATS]


@pytest.mark.parametrize("case", TAR_CASES, ids=case_id)
def test_hostile_archive_is_refused_and_nothing_is_written(tmp_path: Path, case: Case) -> None:
    assert_refused(tmp_path, case)
