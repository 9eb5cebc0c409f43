"""The plugin's command-line and ini options, and the values they take: the require switch
(``--fixture-store-require``, ``$FIXTURE_STORE_REQUIRE``) and test shards (``I/N``)."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

REQUIRE_ENV = "FIXTURE_STORE_REQUIRE"
REQUIRE_VALUES = {"1": True, "0": False, "": False}
# Under CI=true (what GitHub Actions, GitLab CI and most others set) a test that would skip for a
# missing fixture fails, unless the project's pytest configuration says this ini option.
CI_ENV = "CI"
ALLOW_CI_SKIPS = "fixture_store_allow_ci_skips"


# -- shards and shard-aware fetch -----------------------------------------------------------------
# The most shards a suite may be split into: far above any CI matrix (GitHub Actions runs at most
# 256 jobs of one matrix, GitLab 200 of one parallel job), low enough that the shard report's one
# line per shard stays readable and its work stays that of the collection.
MAX_SHARDS = 1024
_DIGITS = re.compile(r"[0-9]{1,12}")  # ASCII digits: int() would take '²' or 5,000 of them badly
_SHOWN = 40  # a refused value longer than this is described, not repeated


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fixture-store", "verified fixtures (fixture-store)")
    group.addoption(
        "--fixture-store-dir",
        metavar="DIR",
        default=None,
        help="Object store (default: $FIXTURE_STORE_DIR, else the per-user cache).",
    )
    group.addoption(
        "--fixture-store-registry",
        metavar="DIR",
        default=None,
        help="Project folder holding provenance/ (default: $FIXTURE_STORE_REGISTRY, else the "
        "folder pytest was started in or its nearest parent with a provenance/ folder).",
    )
    group.addoption(
        "--fixture-store-require",
        action="store_true",
        default=False,
        help="A missing object fails the test instead of skipping it (also "
        f"{REQUIRE_ENV}=1; 0 or empty mean off, other values are refused).",
    )
    group.addoption(
        "--fixture-store-complete",
        action="store_true",
        default=False,
        help="Check that every registry family is consumed by a collected test or "
        "declared a gap, and that no gap is stale.",
    )
    group.addoption(
        "--fixture-store-parity-dump",
        metavar="DIR",
        default=None,
        help="Write a failing parity assertion's candidate (and a copy of its reference) "
        "under DIR, outside the store (also $FIXTURE_STORE_PARITY_DUMP).",
    )
    group.addoption(
        "--fixture-store-env",
        metavar="FACTS",
        default=None,
        help="Where parity assertions run, as conditions (device:cuda,dtype:bfloat16; also "
        "$FIXTURE_STORE_ENV), over what the frameworks already imported say.",
    )
    group.addoption(
        "--fixture-store-attest",
        metavar="DIR",
        default=None,
        help="Write a signed parity certificate (and the outputs it is about) under DIR for "
        "every parity assertion, passing or failing (fixture-store verify-attestation checks "
        "it); needs --fixture-store-attest-key.",
    )
    group.addoption(
        "--fixture-store-attest-key",
        metavar="PEM",
        default=None,
        help="The private key the certificates are signed with (also "
        "$FIXTURE_STORE_ATTEST_KEY); never one inside the store or the registry.",
    )
    group.addoption(
        "--fixture-store-shard",
        metavar="I/N",
        default=None,
        type=Shard.parse,
        help="Run only shard I of N (1 <= I <= N): each test belongs to one shard, decided "
        "by its node id alone, so adding tests never moves the others.",
    )
    group.addoption(
        "--fixture-store-shards",
        metavar="N",
        default=None,
        type=shard_count,
        help="Print how the collected tests split into N shards (tests and artifacts per "
        f"shard, 1 <= N <= {MAX_SHARDS}) and fail unless every test falls in exactly one; use "
        "with --collect-only.",
    )
    group.addoption(
        "--fixture-store-fetch",
        action="store_true",
        default=False,
        help="Before the tests run, fetch exactly the artifacts the selected tests (after "
        "-k, -m and --fixture-store-shard) name, from their pinned sources.",
    )
    parser.addini(
        ALLOW_CI_SKIPS,
        type="bool",
        default=False,
        help=f"Under {CI_ENV}=true, let a test whose fixture is missing skip (default: it "
        "fails, so a CI run never goes green having tested nothing).",
    )
    parser.addini(
        "fixture_store_gaps",
        type="linelist",
        default=[],
        help="Families declared as gaps, one 'family: reason' per line.",
    )


# The options that name a file or folder. Each is read through path_option(): a relative path is
# the invocation folder's (where the user typed it), whatever pytest guessed as its rootdir from
# the arguments and whatever folder a test has changed into since.
PATH_OPTIONS = (
    "fixture_store_dir",
    "fixture_store_registry",
    "fixture_store_parity_dump",
    "fixture_store_attest",
    "fixture_store_attest_key",
)


def path_option(config: pytest.Config, name: str) -> Path | None:
    """The path option ``name`` as given (``~`` expanded), relative to the folder pytest was
    started in; ``None`` if not given."""
    if name not in PATH_OPTIONS:
        raise ValueError(f"{name} is not a path option")  # a caller's slip, not a user's
    value = config.getoption(name)
    if value is None or value == "":
        return None
    return invocation_dir(config) / Path(value).expanduser()


def invocation_dir(config: pytest.Config) -> Path:
    """The folder pytest was started in: where a user's relative paths and project are."""
    return Path(config.invocation_params.dir)


def require_from_env() -> bool:
    """``$FIXTURE_STORE_REQUIRE`` as a bool; a value that is neither 1, 0 nor empty is refused,
    since a CI job that sets ``true`` means require mode and would silently not get it."""
    value = os.environ.get(REQUIRE_ENV, "")
    if value not in REQUIRE_VALUES:
        raise pytest.UsageError(
            f"{REQUIRE_ENV}={shown_value(value)} is not one of the allowed values: "
            "'1' (a missing object fails the test), '0' or empty (it skips); "
            f"set {REQUIRE_ENV}=1 for require mode, or unset it"
        )
    return REQUIRE_VALUES[value]


def allow_ci_skips(config: pytest.Config) -> bool:
    """The ini option :data:`ALLOW_CI_SKIPS`; a value that is no boolean is a usage error naming
    the option (never echoed: it may be long or hold control characters)."""
    try:
        return bool(config.getini(ALLOW_CI_SKIPS))
    except (ValueError, pytest.UsageError):  # pytest raises the one with the value in it
        raise pytest.UsageError(
            f"{ALLOW_CI_SKIPS} is not true or false; set '{ALLOW_CI_SKIPS} = true' to let a "
            f"test whose fixture is missing skip under {CI_ENV}=true, or remove it"
        ) from None


def in_ci() -> bool:
    """Whether this run is a CI job's: ``$CI`` is ``true`` (or ``1``), as CI services set it."""
    return os.environ.get(CI_ENV, "").strip().lower() in ("true", "1")


def shard_count(text: str, *, option: str = "--fixture-store-shards") -> int:
    """N of ``--fixture-store-shards N`` or of ``--fixture-store-shard I/N``: 1 to MAX_SHARDS,
    refused as a usage error naming the option otherwise."""
    if not _DIGITS.fullmatch(text) or not 1 <= int(text) <= MAX_SHARDS:
        raise pytest.UsageError(
            f"{option}: N {shown_value(text)} is not a whole number from 1 to {MAX_SHARDS} (the "
            "number of shards the suite is split into, e.g. the size of the CI matrix)"
        )
    return int(text)


def shown_value(text: str) -> str:
    """An option's refused value: quoted if short, else described (never repeated at length)."""
    return repr(text) if len(text) <= _SHOWN else f"(a value of {len(text)} characters)"


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based), as ``--fixture-store-shard I/N`` writes it."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        index, sep, count = text.partition("/")
        if not (sep and _DIGITS.fullmatch(index) and _DIGITS.fullmatch(count)):
            raise pytest.UsageError(
                f"--fixture-store-shard {shown_value(text)} is not I/N (e.g. 2/4)"
            )
        shard = cls(int(index), shard_count(count, option="--fixture-store-shard"))
        if not 1 <= shard.index <= shard.count:
            raise pytest.UsageError(
                f"--fixture-store-shard {text}: I must be between 1 and N ({shard.count})"
            )
        return shard

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def holds(self, item: pytest.Item) -> bool:
        return shard_of(item.nodeid, self.count) == self.index


def shard_of(nodeid: str, count: int) -> int:
    """The shard (1..count) of a test: a hash of its node id alone, the same in every process
    and on every machine, unmoved when other tests are added or removed."""
    digest = hashlib.sha256(nodeid.encode()).digest()
    return int.from_bytes(digest[:8], "big") % count + 1
