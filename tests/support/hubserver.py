"""A loopback server that speaks the Hugging Face Hub's file download protocol, for tests.

It answers ``HEAD``/``GET /{repo_id}/resolve/{revision}/{path}`` (and ``/datasets/...``,
``/spaces/...``) the way the Hub does for the real ``huggingface_hub`` client:

- a regular (git) file: 200 with ``X-Repo-Commit``, ``ETag`` (its git blob id, the name the
  client's cache gives its blob) and
  ``Content-Length``;
- an LFS file: 302 to a separate "CDN" server (another port, so the client treats it as a foreign
  host and does not forward the token), with ``X-Repo-Commit``, ``X-Linked-Etag`` (the sha256),
  ``X-Linked-Size`` and ``Location``; the CDN serves the bytes with ``Range`` support;
- an unknown revision or path: 404 with the Hub's ``X-Error-Code``.

Faults for tests: ``lie`` (announce the registered digest but serve other bytes), ``truncate``
(close the connection half-way through every body), ``hang`` (send half the body, then stall),
``hang_head`` (never answer the metadata request), ``trickle`` (send the body one byte every
``trickle_s`` seconds, each read in time for a per-read timeout); ``answered_commit`` makes
every answer name another commit than the one requested (a server that resolved the revision
elsewhere). Every request is recorded.

It also speaks the upload protocol (:mod:`tests.support.hubupload`): a commit makes a new commit
of the branch, and every commit stays readable at its sha.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support import hubupload

_RESOLVE = re.compile(r"/(?:(datasets|spaces)/)?(.+?)/resolve/([^/]+)/(.+)")


@dataclass
class HubFile:
    content: bytes
    lfs: bool = True
    fault: str | None = None  # None, "lie", "truncate", "hang", "hang_head", "trickle"
    announce: bytes | None = None  # what the headers describe ("lie": not what is served)
    trickle_s: float = 0.05

    @property
    def sha256(self) -> str:
        return hashlib.sha256(
            self.announce if self.announce is not None else self.content
        ).hexdigest()

    @property
    def size(self) -> int:
        return len(self.announce if self.announce is not None else self.content)


@dataclass
class HubState:
    commit: str
    answered_commit: str | None = None  # the X-Repo-Commit sent, when not ``commit``
    answered_oid: str | None = None  # the commitOid a commit answers, when not the commit's
    files: dict[tuple[str, str, str], HubFile] = field(default_factory=dict)  # type, repo, path
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    cdn_base: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)
    # The upload protocol: each commit's files, branches, uploaded LFS blobs by oid, the commits
    # made, the base of the URLs handed out, and whether uploads are checked (a real Hub's are).
    snapshots: dict[str, dict[tuple[str, str, str], HubFile]] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)
    commits: list[str] = field(default_factory=list)
    public_base: str = ""
    check_uploads: bool = True
    garbage: bool = False  # the API answers what is not JSON
    failing: bool = False  # the API answers every request 503
    rewrite_regular: bool = False  # a commit keeps each non-LFS file with its first byte changed
    missing: set[tuple[str, str]] = field(default_factory=set)  # repos (type, id) not on the Hub
    created: list[tuple[str, str, str | None]] = field(default_factory=list)  # and visibility

    def __post_init__(self) -> None:
        self.snapshots[self.commit] = self.files
        self.branches["main"] = self.commit

    def add(
        self, repo_id: str, path: str, content: bytes, *, repo_type: str = "model", **kwargs: Any
    ) -> HubFile:
        f = HubFile(content, **kwargs)
        self.files[(repo_type, repo_id, path)] = f
        return f

    @property
    def repo_commit(self) -> str:
        return self.answered_commit or self.commit

    def by_sha(self, sha: str) -> HubFile | None:
        return next((f for f in self.files.values() if f.sha256 == sha), None)

    def record(self, method: str, path: str, headers: dict[str, str]) -> None:
        with self.lock:
            self.requests.append((method, path, headers))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: HubState
    role: str  # "hub" or "cdn"
    answering: str = ""  # the commit an answer names (X-Repo-Commit)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        if self.role == "hub" and self.path.startswith("/api/"):
            self.state.record(self.command, self.path, dict(self.headers.items()))
            if hubupload.handle(self, self.state):
                return
        self._serve(body=True)

    def do_POST(self) -> None:
        self.state.record(self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
        if not hubupload.handle(self, self.state):
            self._error(404, "RepoNotFound")

    do_PUT = do_POST

    def _serve(self, *, body: bool) -> None:  # noqa: PLR0911 - one answer per route or refusal
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.state.record(self.command, self.path, headers)
        self.answering = self.state.repo_commit
        if self.role == "cdn":
            f = self.state.by_sha(self.path.rsplit("/", 1)[-1])
            if f is None:
                return self._error(404, "EntryNotFound")
            return self._send_bytes(f, body)
        m = _RESOLVE.fullmatch(self.path)
        if m is None:
            return self._error(404, "RepoNotFound")
        prefix, repo_id, revision, path = m.groups()
        repo_type = {"datasets": "dataset", "spaces": "space"}.get(prefix or "", "model")
        self.answering = self.state.answered_commit or revision
        files = self.state.snapshots.get(revision)
        if files is None:
            return self._error(404, "RevisionNotFound")
        f = files.get((repo_type, repo_id, path))
        if f is None:
            return self._error(404, "EntryNotFound")
        if f.fault == "hang_head":
            self.state.release.wait(30)
            self.close_connection = True
            return None
        if f.lfs:
            self.send_response(302)
            self.send_header("X-Repo-Commit", self.answering)
            self.send_header("X-Linked-Etag", f'"{f.sha256}"')
            self.send_header("X-Linked-Size", str(f.size))
            self.send_header("ETag", '"0123456789abcdef0123456789abcdef01234567"')
            self.send_header("Location", f"{self.state.cdn_base}/cdn/{f.sha256}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        self._send_bytes(f, body, hub=True)
        return None

    def _error(self, code: int, hub_code: str) -> None:
        msg = f"{hub_code}\n".encode()
        self.send_response(code)
        self.send_header("X-Error-Code", hub_code)
        self.send_header("X-Error-Message", hub_code)
        self.send_header("X-Repo-Commit", self.answering)
        self.send_header("Content-Length", str(len(msg)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(msg)

    def _send_bytes(self, f: HubFile, body: bool, *, hub: bool = False) -> None:
        data = f.content
        start = 0
        rng = self.headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng.strip())
            if m:
                start = int(m.group(1))
                end = int(m.group(2)) + 1 if m.group(2) else len(data)
                data = data[start:end]
        self.send_response(206 if rng else 200)
        if hub:
            self.send_header("X-Repo-Commit", self.answering)
            self.send_header("ETag", f'"{git_blob_id(f.content)}"')
        if rng:
            self.send_header(
                "Content-Range", f"bytes {start}-{start + len(data) - 1}/{len(f.content)}"
            )
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if not body:
            return
        half = max(len(f.content) // 2 - start, 0)
        if f.fault == "truncate":
            self.wfile.write(data[:half])
            self.wfile.flush()
            self.close_connection = True
            return
        if f.fault == "trickle":
            for i in range(len(data)):
                if self.state.release.wait(f.trickle_s):
                    break
                try:
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
                except OSError:  # the client gave up: the test's point
                    break
            self.close_connection = True
            return
        if f.fault == "hang":
            self.wfile.write(data[:half])
            self.wfile.flush()
            self.state.release.wait(30)
            self.close_connection = True
            return
        self.wfile.write(data)


def git_blob_id(content: bytes) -> str:
    """The git blob id of ``content``: the SHA-1 of ``blob <size>\\0`` and the bytes."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content, usedforsecurity=False).hexdigest()


def _server(state: HubState, role: str) -> ThreadingHTTPServer:
    handler = type(f"{role.title()}Handler", (_Handler,), {"state": state, "role": role})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    return server


@contextmanager
def hub_server(commit: str) -> Iterator[tuple[str, HubState]]:
    """Start a Hub and its CDN on 127.0.0.1; yield (endpoint URL, state)."""
    state = HubState(commit)
    hub, cdn = _server(state, "hub"), _server(state, "cdn")
    state.cdn_base = f"http://127.0.0.1:{cdn.server_address[1]}"
    state.public_base = f"http://127.0.0.1:{hub.server_address[1]}"
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (hub, cdn)]
    for t in threads:
        t.start()
    try:
        yield f"http://127.0.0.1:{hub.server_address[1]}", state
    finally:
        state.release.set()
        for s in (hub, cdn):
            s.shutdown()
            s.server_close()
