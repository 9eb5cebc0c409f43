"""The Hub's upload protocol, as the loopback Hub (:mod:`tests.support.hubserver`) speaks it to
the real ``huggingface_hub`` client (its ``HfApi.create_commit``, ``repo_info`` and
``get_paths_info``):

- ``GET /api/{type}s/{repo}/revision/{rev}``: the commit a branch (or a commit) names;
- ``POST /api/{type}s/{repo}/paths-info/{rev}``: the files among the form's ``paths`` at a commit,
  with their size, git oid and, for LFS files, their sha256;
- ``POST /api/{type}s/{repo}/preupload/{rev}``: each file's upload mode (LFS from 1 KiB, or for
  a sample with a NUL byte; regular below);
- ``POST /{prefix}{repo}.git/info/lfs/objects/batch``: an upload and a verify action for each
  object the server lacks (``basic`` transfer), none for those it has;
- ``PUT /lfs-upload/{oid}``: the bytes, kept as received (``check_uploads``: their sha256 must be
  the oid, else 400); ``POST /lfs-verify``: the kept bytes must have the announced size and oid
  (else 422, when ``check_uploads``);
- ``POST /api/{type}s/{repo}/commit/{rev}``: an NDJSON body (a header, then ``file`` with base64
  content or ``lfsFile`` naming an uploaded oid) makes a new commit of the branch: the previous
  commit's files plus these, readable at once through the download routes (``rewrite_regular``:
  a Hub that commits each ``file`` with its first byte changed, the size kept);
- ``POST /api/repos/create``: the JSON's ``organization``/``name`` and ``type`` make a repo the
  server lacked (one of ``state.missing``; every API route of a missing repo answers 404
  ``RepoNotFound``, as the Hub does), recorded with its ``visibility`` in ``state.created``;
  409 for a repo there already.

The handed-out URLs start with ``state.public_base`` (the fault proxy's URL when one stands in
front), so every upload goes through whatever the client's endpoint is.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.support.hubserver import HubState

_API = re.compile(
    r"/api/(models|datasets|spaces)/(.+?)/(revision|paths-info|preupload|commit)/(.+)"
)
_BATCH = re.compile(r"/(?:(datasets|spaces)/)?(.+?)\.git/info/lfs/objects/batch")
LFS_FROM = 1024
_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}


def read_body(req: BaseHTTPRequestHandler) -> bytes:
    """The request's body: by its Content-Length, or chunked."""
    if req.headers.get("Transfer-Encoding", "").lower() == "chunked":
        parts: list[bytes] = []
        while True:
            size = int(req.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                req.rfile.readline()
                return b"".join(parts)
            parts.append(req.rfile.read(size))
            req.rfile.readline()
    length = int(req.headers.get("Content-Length") or 0)
    return req.rfile.read(length) if length else b""


def git_oid(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def handle(req: BaseHTTPRequestHandler, state: HubState) -> bool:
    """Answer ``req`` if it is an upload-protocol route; False if it is not one."""
    path = urllib.parse.urlsplit(req.path).path
    if req.command == "PUT" and path.startswith("/lfs-upload/"):
        _upload(req, state, path.rsplit("/", 1)[-1])
        return True
    if req.command == "POST" and path == "/lfs-verify":
        _verify(req, state)
        return True
    m = _BATCH.fullmatch(path)
    if req.command == "POST" and m is not None:
        _batch(req, state)
        return True
    if req.command == "POST" and path == "/api/repos/create":
        _create(req, state)
        return True
    m = _API.fullmatch(path)
    if m is None:
        return False
    if (_TYPES[m.group(1)], m.group(2)) in state.missing:
        _error(req, 404, "RepoNotFound", f"Repository Not Found: {m.group(2)}")
    elif not _broken(req, state):
        _api(req, state, m)
    return True


def _create(req: BaseHTTPRequestHandler, state: HubState) -> None:
    asked = json.loads(read_body(req))
    repo_id = (
        f"{asked['organization']}/{asked['name']}" if asked.get("organization") else asked["name"]
    )
    repo = (asked.get("type") or "model", repo_id)
    if repo not in state.missing:
        return _error(req, 409, "Conflict", "You already created this repo")
    with state.lock:
        state.missing.discard(repo)
        state.created.append((*repo, asked.get("visibility")))
    prefix = "" if repo[0] == "model" else f"{repo[0]}s/"
    send_json(req, 200, {"url": f"{state.public_base}/{prefix}{repo_id}", "name": repo_id})
    return None


def _broken(req: BaseHTTPRequestHandler, state: HubState) -> bool:
    """Answer as a broken Hub does, if ``state`` says it is one (503s, or what is not JSON)."""
    if state.failing:
        _error(req, 503, "ServiceUnavailable", "the Hub is down")
        return True
    if state.garbage:
        req.send_response(200)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", "21")
        req.end_headers()
        req.wfile.write(b"<html>not json</html>")
        return True
    return False


def _api(req: BaseHTTPRequestHandler, state: HubState, m: re.Match[str]) -> None:
    kind, repo_id, route, revision = m.groups()
    repo_type = _TYPES[kind]
    revision = urllib.parse.unquote(revision)
    if route == "revision":
        _revision(req, state, repo_id, revision)
    elif route == "paths-info":
        _paths_info(req, state, (repo_type, repo_id), revision)
    elif route == "preupload":
        _preupload(req)
    else:
        _commit(req, state, (repo_type, repo_id), revision)


def send_json(req: BaseHTTPRequestHandler, status: int, body: Any, **headers: str) -> None:
    data = json.dumps(body).encode()
    req.send_response(status)
    req.send_header("Content-Type", "application/json")
    for key, value in headers.items():
        req.send_header(key.replace("_", "-"), value)
    req.send_header("Content-Length", str(len(data)))
    req.end_headers()
    req.wfile.write(data)


def _error(req: BaseHTTPRequestHandler, status: int, code: str, message: str) -> None:
    send_json(req, status, {"error": message}, X_Error_Code=code, X_Error_Message=message)


def _revision(req: BaseHTTPRequestHandler, state: HubState, repo_id: str, revision: str) -> None:
    sha = state.branches.get(revision, revision if revision in state.snapshots else None)
    if sha is None:
        return _error(req, 404, "RevisionNotFound", f"Invalid rev id: {revision}")
    send_json(req, 200, {"id": repo_id, "sha": sha, "siblings": [], "private": False})
    return None


def _paths_info(
    req: BaseHTTPRequestHandler, state: HubState, repo: tuple[str, str], revision: str
) -> None:
    form = urllib.parse.parse_qs(read_body(req).decode())
    sha = state.branches.get(revision, revision)
    files = state.snapshots.get(sha)
    if files is None:
        return _error(req, 404, "RevisionNotFound", f"Invalid rev id: {revision}")
    answer = []
    for path in form.get("paths", []):
        f = files.get((*repo, path))
        if f is None:
            continue
        entry: dict[str, Any] = {
            "type": "file",
            "path": path,
            "size": len(f.content),
            "oid": git_oid(f.content),
        }
        if f.lfs:
            entry["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": 134}
        answer.append(entry)
    send_json(req, 200, answer)
    return None


def _preupload(req: BaseHTTPRequestHandler) -> None:
    files = json.loads(read_body(req))["files"]
    modes = []
    for f in files:
        sample = base64.b64decode(f["sample"])
        lfs = f["size"] >= LFS_FROM or b"\0" in sample
        modes.append(
            {"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False}
        )
    send_json(req, 200, {"files": modes})


def _batch(req: BaseHTTPRequestHandler, state: HubState) -> None:
    asked = json.loads(read_body(req))
    answer = []
    for obj in asked["objects"]:
        oid, size = obj["oid"], obj["size"]
        entry: dict[str, Any] = {"oid": oid, "size": size, "authenticated": True}
        if oid not in state.blobs:
            entry["actions"] = {
                "upload": {"href": f"{state.public_base}/lfs-upload/{oid}"},
                "verify": {"href": f"{state.public_base}/lfs-verify"},
            }
        answer.append(entry)
    send_json(req, 200, {"transfer": "basic", "objects": answer})


def _upload(req: BaseHTTPRequestHandler, state: HubState, oid: str) -> None:
    body = read_body(req)
    if state.check_uploads and hashlib.sha256(body).hexdigest() != oid:
        return _error(req, 400, "BadRequest", f"the body is not the object {oid}")
    with state.lock:
        state.blobs[oid] = body
    req.send_response(200)
    req.send_header("Content-Length", "0")
    req.end_headers()
    return None


def _verify(req: BaseHTTPRequestHandler, state: HubState) -> None:
    asked = json.loads(read_body(req))
    blob = state.blobs.get(asked["oid"])
    if state.check_uploads and (blob is None or len(blob) != asked["size"]):
        got = "nothing" if blob is None else f"{len(blob)} bytes"
        return _error(req, 422, "VerifyFailed", f"object {asked['oid']}: received {got}")
    send_json(req, 200, {"ok": True})
    return None


def _commit(
    req: BaseHTTPRequestHandler, state: HubState, repo: tuple[str, str], revision: str
) -> None:
    from tests.support.hubserver import HubFile

    lines = [json.loads(line) for line in read_body(req).splitlines() if line.strip()]
    sha = state.branches.get(revision)
    if sha is None:
        return _error(req, 404, "RevisionNotFound", f"no branch {revision}")
    added = {}
    for line in lines:
        value = line["value"]
        if line["key"] == "file":
            content = base64.b64decode(value["content"])
            if state.rewrite_regular and content:
                content = bytes([content[0] ^ 1]) + content[1:]
            added[(*repo, value["path"])] = HubFile(content, lfs=False)
        elif line["key"] == "lfsFile":
            blob = state.blobs.get(value["oid"])
            if blob is None:
                return _error(req, 422, "BadRequest", f"LFS object {value['oid']} not uploaded")
            added[(*repo, value["path"])] = HubFile(blob, lfs=True)
    with state.lock:
        files = {**state.snapshots[sha], **added}
        new = hashlib.sha1((sha + json.dumps(sorted(k[2] for k in added))).encode()).hexdigest()
        state.snapshots[new] = files
        state.branches[revision] = new
        if sha == state.commit:
            state.commit, state.files = new, files
        state.commits.append(new)
    prefix = "" if repo[0] == "model" else f"{repo[0]}s/"
    url = f"{state.public_base}/{prefix}{repo[1]}/commit/{new}"
    oid = state.answered_oid or new
    send_json(req, 200, {"commitUrl": url, "commitOid": oid, "success": True})
    return None
