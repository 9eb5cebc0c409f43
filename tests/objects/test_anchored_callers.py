"""No module opens, creates, renames or removes a path any other way than through the one path
primitive (DESIGN 13, ``fixture_store.objects.anchored``), but where the allow-list below says
why: paths that are not under the store, the registry, a remote folder, an extraction or a
dump (the user's input files, configuration, reports), or a reader this change has not routed
yet (named so, to be done).

The walk reads the package's source (``ast``): every call of the file system's entry points
(``open``, ``os.open``/``replace``/``rename``/``unlink``/``link``/``mkdir``..., ``shutil``,
``tempfile``) is found with the function it is in. The modules that own a root
(:data:`ROOT_OWNERS`) are also held for ``pathlib`` calls that only a path has (``write_text``,
``glob``, ``rename``...): a new one fails here until it goes through the primitive."""

from __future__ import annotations

import ast
from pathlib import Path

import fixture_store

PACKAGE = Path(fixture_store.__file__).parent
PRIMITIVE = "objects/anchored.py"
ENTRY_POINTS = frozenset(
    {
        "open",
        "os.open",
        "os.replace",
        "os.rename",
        "os.renames",
        "os.unlink",
        "os.remove",
        "os.link",
        "os.symlink",
        "os.mkdir",
        "os.makedirs",
        "os.rmdir",
        "os.removedirs",
        "os.chmod",
        "os.truncate",
        "shutil.rmtree",
        "shutil.copyfile",
        "shutil.copy",
        "shutil.copy2",
        "shutil.copytree",
        "shutil.move",
        "tempfile.mkstemp",
        "tempfile.mkdtemp",
        "tempfile.NamedTemporaryFile",
        "tempfile.TemporaryDirectory",
    }
)
# Methods only a pathlib path has (the primitive's Folder has none of them).
PATH_ONLY_METHODS = frozenset(
    {"write_text", "write_bytes", "read_text", "touch", "symlink_to", "glob", "rglob", "iterdir"}
)
ROOT_OWNERS = frozenset(
    {
        "objects/store.py",
        "objects/hashcopy.py",
        "objects/object_files.py",
        "objects/publishing.py",
        "objects/staging.py",
        "objects/writer_lock.py",
        "readers/archives/extract.py",
        "access.py",
        "parity/assertion.py",
        "remotes/folder.py",
        "registry/documents.py",
        "registry/reading.py",
        "registry/transactions.py",
        "registry/writing.py",
        "registry/shards.py",
    }
)
_NOT_A_ROOT = "not under a root:"
_NOT_YET = "reader not routed yet:"
ALLOWED: dict[tuple[str, str], str] = {
    # -- the file system helpers the primitive sits beside -------------------------------------
    ("objects/fsutil.py", "fsync_path"): "fsyncs a path its caller opened and checked",
    ("objects/fsutil.py", "flocked"): "opens a lock file O_NOFOLLOW from its folder's "
    "descriptor when given one (the store and the registry always give one)",
    ("objects/fsutil.py", "remove_tree"): f"{_NOT_A_ROOT} removes folders outside the roots "
    "(regeneration's candidates); never follows a link",
    (
        "objects/fsutil.py",
        "remove_tree.make_writable",
    ): "part of remove_tree (never follows a link)",
    ("objects/fsutil.py", "SyncBatch.__init__"): "opens a folder read-only only to syncfs its "
    "filesystem; nothing is read or written through it",
    ("objects/digests.py", "read_small"): "reads a path its caller names: the store's own "
    "temp file it just made (_hash_copy); verify reads objects from a descriptor the primitive "
    "opened (read_small_fd)",
    ("objects/digests.py", "_feed_file"): "hashes a path its caller names (the user's files, "
    "generator outputs), or wraps a descriptor the primitive opened (verify's objects)",
    ("objects/statecache.py", "mark_passed"): "creates a cache marker O_NOFOLLOW",
    ("objects/store.py", "Store._link_temp"): "links and hashes the user's source file (not "
    "under a root) into a temp name made from the temp folder's descriptor",
    ("objects/publishing.py", "_holds"): "wraps the descriptor the primitive opened "
    "(open(fd)): no path is opened",
    ("objects/store.py", "Store.remove"): "unlinks relative to the shard's descriptor",
    ("objects/hashcopy.py", "_open_source"): f"{_NOT_A_ROOT} the user's file to add",
    ("registry/project.py", "_setting"): f"{_NOT_A_ROOT} the project's pyproject.toml",
    ("registry/documents.py", "schema"): f"{_NOT_A_ROOT} the package's own JSON Schema",
    ("objects/outputs.py", "_walks_to"): "opens '..' from an open folder's descriptor "
    "(O_DIRECTORY | O_NOFOLLOW) to walk up to the file system's root; nothing is read or "
    "written through it",
    ("objects/outputs.py", "Target.check_wipeable"): "opens the store's root read-only as a "
    "folder, only to walk up from it (is the store below a folder about to be emptied?)",
    # -- the verbs and readers ----------------------------------------------------------------
    ("readers/archives/write.py", "write_tar"): f"{_NOT_A_ROOT} writes a user's archive",
    ("readers/formats.py", "sniff"): f"{_NOT_A_ROOT} reads the leading bytes of the "
    "user's file; store objects are sniffed from a descriptor the primitive opened",
    ("readers/npy.py", "read_metadata"): f"{_NOT_A_ROOT} a metadata file its caller names "
    "(safetensors hands it the header's bytes)",
    ("readers/pinned.py", "PinnedFile.__init__"): f"{_NOT_A_ROOT} opens the user's file by "
    "its path; a store object comes opened through the primitive (pin_object)",
    ("remotes/folder.py", "FolderRemote._publish"): "reads the store's object the push "
    "names; writes only through the primitive",
    ("remotes/config.py", "_read"): f"{_NOT_A_ROOT} the user's configuration file",
    ("remotes/config.py", "_write_checked"): f"{_NOT_A_ROOT} the user's configuration file",
    ("remotes/s3.py", "S3Remote._upload_parts"): "reads the store's object the push names",
    ("remotes/s3.py", "S3Remote.upload"): "reads the store's object the push names",
    ("remotes/packs.py", "push_packed"): f"{_NOT_A_ROOT} makes the push's private scratch "
    "folder (mkdtemp: 0700)",
    ("remotes/packs.py", "_write_pack"): "makes, reads back and removes a pack in the push's "
    "own scratch folder (mkdtemp: 0700), no root of ours",
    ("remotes/packs.py", "_write_index"): "makes and removes the index in the push's own "
    "scratch folder (mkdtemp: 0700), no root of ours",
    ("remotes/gc.py", "execute"): f"{_NOT_A_ROOT} makes remote gc's private scratch folder "
    "(mkdtemp: 0700)",
    ("remotes/gc.py", "_put_checked"): "makes an index in remote gc's own scratch folder "
    "(mkdtemp: 0700), no root of ours",
    ("remotes/gc.py", "_repack"): "makes, reads back and removes a new pack in remote gc's own "
    "scratch folder (mkdtemp: 0700), no root of ours",
    ("remotes/hub.py", "HubRemote._commit"): "reads the store's objects the push names, handed "
    "to the Hub client as open files",
    ("sources/ranges.py", "_local"): f"{_NOT_A_ROOT} reads a tensor's range of the project's "
    "source file, opened O_NOFOLLOW",
    ("importers/held.py", "_temp"): "makes a file O_EXCL in the import's own private scratch "
    "folder (mkstemp)",
    ("objects/statcheck.py", "Folders.fd"): "opens shard folders O_NOFOLLOW | O_DIRECTORY",
    ("snapshot.py", "_read"): f"{_NOT_A_ROOT} the user's private snapshot cache, O_NOFOLLOW",
    ("snapshot.py", "_write"): f"{_NOT_A_ROOT} the user's private snapshot cache",
    ("sources/local.py", "fetch"): f"{_NOT_A_ROOT} reads the project's source file",
    ("sources/local.py", "fetch.open_member"): f"{_NOT_A_ROOT} reads the project's source",
    ("sources/package.py", "_load"): f"{_NOT_A_ROOT} reads a downloaded distribution",
    ("importers/entry.py", "read_manifest"): f"{_NOT_A_ROOT} the manifest to import",
    ("importers/plan.py", "PackageOrigin.locate"): f"{_NOT_A_ROOT} an installed package",
    ("importers/plan.py", "_chunks"): f"{_NOT_A_ROOT} reads the user's file to import",
    ("cli/imports.py", "import_cmd"): f"{_NOT_A_ROOT} the manifest the user names",
    ("regenerate/drift.py", "_keep"): f"{_NOT_A_ROOT} the drift folder the user names",
    ("regenerate/drift.py", "compare"): f"{_NOT_A_ROOT} a generator's candidate outputs",
    ("regenerate/envs.py", "ensure"): f"{_NOT_YET} builds envs/ in the store with links "
    "refused by lstat",
    ("regenerate/run.py", "_fresh_folder"): f"{_NOT_A_ROOT} the stage's output folder",
    ("regenerate/outputs.py", "read_details"): f"{_NOT_A_ROOT} a generator's details.json",
    ("regenerate/summary.py", "_load"): f"{_NOT_A_ROOT} a stage report the user names",
    ("regenerate/summary.py", "_load_run"): f"{_NOT_A_ROOT} the run report beside it",
    ("regenerate/run.py", "regenerate"): f"{_NOT_A_ROOT} the stage's output folder",
}


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _calls(path: Path) -> list[tuple[str, str, int]]:
    """(function qualname, call, line) of every file-system call in a module."""
    rel = path.relative_to(PACKAGE).as_posix()
    found: list[tuple[str, str, int]] = []
    scope: list[str] = []

    class Visitor(ast.NodeVisitor):
        def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
            scope.append(node.name)
            self.generic_visit(node)
            scope.pop()

        visit_AsyncFunctionDef = visit_FunctionDef

        def visit_ClassDef(self, node: ast.ClassDef) -> None:
            scope.append(node.name)
            self.generic_visit(node)
            scope.pop()

        def visit_Call(self, node: ast.Call) -> None:
            name = _dotted(node.func)
            method = node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name in ENTRY_POINTS:
                found.append((".".join(scope) or "<module>", name, node.lineno))
            elif rel in ROOT_OWNERS and method in PATH_ONLY_METHODS:
                found.append((".".join(scope) or "<module>", f"Path.{method}", node.lineno))
            self.generic_visit(node)

    Visitor().visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def _bypasses() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == PRIMITIVE:
            continue
        for function, call, line in _calls(path):
            if (rel, function) not in ALLOWED:
                out.append(f"{rel}:{line} {function}: {call}")
    return out


def test_no_module_opens_a_path_but_through_the_primitive_or_for_a_stated_reason() -> None:
    bypasses = _bypasses()
    assert bypasses == [], (
        "these calls open, create, rename or remove a path without the path primitive "
        "(fixture_store.objects.anchored); route them through it, or, for a path under no "
        "root, add an entry with its reason to ALLOWED:\n  " + "\n  ".join(bypasses)
    )


def test_every_allowed_entry_still_exists_and_says_why() -> None:
    """A stale entry would let the next bypass in the same function through unnoticed."""
    present = {
        (path.relative_to(PACKAGE).as_posix(), function)
        for path in PACKAGE.rglob("*.py")
        for function, _, _ in _calls(path)
    }
    assert sorted(set(ALLOWED) - present) == []
    assert all(len(reason) > 20 for reason in ALLOWED.values())


def test_the_walk_finds_a_bypass_in_a_root_owner(tmp_path: Path) -> None:
    """The walk itself: a module writing a registry file by path is found."""
    module = tmp_path / "files.py"
    module.write_text(
        "import os\ndef write(path):\n    path.write_text('x')\n    os.replace(path, path)\n"
    )
    found = ast.parse(module.read_text())
    calls = {
        _dotted(n.func)
        for n in ast.walk(found)
        if isinstance(n, ast.Call) and _dotted(n.func) in ENTRY_POINTS
    }
    assert calls == {"os.replace"}
