"""The export index, `<records>/export-index.json`: its format, the content hash it records, which folders and names
an entry may hold, and where older exports kept it. The tree writes it (gitops/tree.py); opening OUT reads it back
and trusts nothing in it it could not have written (gitops/repo/out_folder.py); the writer and the preview compare
files with what it records (`matches_record`, `same_content`); all through this module.

The index lists every file the stack's last export owns with a hash of its content (what a re-export may replace or
prune), the lines it keeps in hand-written files (`edits`), the Kustomization paths it points outside its folders,
and the stack outputs as exported (`stackOutputs`, which the next preview diffs against).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

from gitops import headers
from gitops.engine.stacks import export_command
from model.layout import Layout
from model.safe_yaml import DocumentsError, yaml_documents

INDEX_FILE = "export-index.json"
DELIVERY_FILE = "DELIVERY.md"
CHECKLIST_FILE = "POST-MERGE.md"
SUITE_DIR = "post-merge"
SUITE_FILE = "chainsaw-test.yaml"  # the one name Chainsaw's discovery reads as a Test
# The names the export gives its files (`<kind>.<name>.yaml`, kustomization.yaml and its three documents): an index
# entry naming anything else is not the export's, whatever its hash says.
EXPORTED_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?\.yaml$")
_EXPORTED_DOCS = {INDEX_FILE, DELIVERY_FILE, CHECKLIST_FILE}
_HASH = re.compile(r"^(yaml:)?[0-9a-f]{64}$")
HINT = "hint: restore it from git, or delete it together with the stack's exported folders"


def index_path(layout: Layout) -> str:
    return f"{layout.records}/{INDEX_FILE}"


def legacy_index_path(stack: str) -> str:
    """Where exports before the entry folder kept the index (clusters/<stack>/export-index.json)."""
    return f"clusters/{stack}/{INDEX_FILE}"


def suite_path(layout: Layout) -> str:
    """Where the stack's post-merge suite is written: a record beside POST-MERGE.md, never objects for the cluster."""
    return f"{layout.records}/{SUITE_DIR}/{SUITE_FILE}"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@lru_cache(maxsize=4096)  # pure; one export hashes each of its files for the index, the plan and the drift
def content_hash(path: str, data: bytes) -> str:
    """What the index records: for YAML the parsed documents (so a formatter's indentation, quoting or comment
    placement is not an edit), for everything else the bytes. Raises ValueError for YAML that does not parse."""
    if path.endswith((".yaml", ".yml")):
        try:
            docs = yaml_documents(data)
        except DocumentsError as exc:
            raise ValueError({"invalid": f"not valid YAML ({exc.problem})",
                              "unreadable": f"not readable as YAML ({exc.problem})"}.get(
                exc.reason, "expands through its aliases beyond any manifest (an alias bomb?)")) from None
        data = json.dumps([d for d in docs if d is not None], sort_keys=True, default=str).encode()
        return "yaml:" + sha(data)
    return sha(data)


def compared_hash(path: str, data: bytes) -> str:
    """What ownership and drift compare: `content_hash` of the file as the current header has it, so a file an
    older export wrote, with its older header, is neither an edit by hand nor drift (gitops/headers.py)."""
    return content_hash(path, data if path.endswith((".yaml", ".yml")) else headers.current_form(data))


def comparable_hash(rel: str, data: bytes) -> str:
    """`compared_hash`, or for a file that does not parse a value no record holds."""
    try:
        return compared_hash(rel, data)
    except ValueError:
        return "unparsable:" + sha(data)  # equals no recorded hash: a broken file counts as edited by hand


def same_content(rel: str, current: bytes, content: bytes) -> bool:
    """The two files mean the same to Flux (for YAML: the same documents, whatever a formatter did)."""
    return current == content or comparable_hash(rel, current) == comparable_hash(rel, content)


def matches_record(rel: str, current: bytes, recorded: str) -> bool:
    """The file is as the last export left it. Indexes written before content hashes recorded plain sha256."""
    return comparable_hash(rel, current) == recorded or (not recorded.startswith("yaml:") and sha(current) == recorded)


def index_json(stack: str, files: Mapping[str, bytes], external_paths: Mapping[str, str],
               edits: Mapping[str, dict[str, Any]], edited: Iterable[str],
               stack_outputs: dict[str, Any] | None = None) -> bytes:
    """The index of a stack's export: every file it owns with its content hash (never a hand-written file it keeps
    lines in, `edited`: only those lines, `edits`), the Kustomization paths outside its folders, the stack outputs."""
    hashes = {p: content_hash(p, c) for p, c in sorted(files.items())}
    doc: dict[str, Any] = {
        "generatedBy": export_command(stack),
        "stack": stack,
        "files": hashes,
        "externalPaths": dict(sorted(external_paths.items())),
    }
    if edits:  # the lines kept in hand-written files: prune takes out exactly these, drift checks them
        doc["edits"] = dict(edits)
    for rel in edited:
        hashes.pop(rel, None)
    if stack_outputs is not None:
        doc["stackOutputs"] = stack_outputs
    return (json.dumps(doc, indent=2, sort_keys=True) + "\n").encode()


def normalized(rel: object) -> str | None:
    """`rel` when it is a relative, normalized, `/`-separated path with no `.`/`..` part, else None."""
    if not isinstance(rel, str) or not rel or rel.startswith("/") or "\\" in rel or "\0" in rel:
        return None
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts) or posixpath.normpath(rel) != rel:
        return None
    return rel


def owned_folders(layout: Layout, stack: str, legacy: bool) -> list[tuple[str, bool]]:
    """(folder, whole subtree?) a stack's index may name files in. The older layout owned clusters/<stack>/ itself
    (its files, not flux-system/ below) and components/<stack>/."""
    if legacy:
        return [(f"clusters/{stack}", False), (f"components/{stack}", True)]
    suite = posixpath.dirname(suite_path(layout))  # the post-merge Chainsaw suite, beside POST-MERGE.md
    return layout.index_folders(suite)


def entry_problem(rel: object, digest: object, allowed: list[tuple[str, bool]]) -> str | None:
    """Why an entry of the index's `files` cannot be one the export wrote, or None."""
    path = normalized(rel)
    if path is None:
        return "not a relative, normalized path inside the repository"
    folder, name = posixpath.split(path)
    if not any(folder == f or (deep and folder.startswith(f + "/")) for f, deep in allowed):
        return f"outside this stack's folders ({', '.join(f for f, _ in allowed)})"
    if not (EXPORTED_NAME.fullmatch(name) or name in _EXPORTED_DOCS):
        return "not a name the export gives its files"
    if not isinstance(digest, str) or not _HASH.fullmatch(digest):
        return "not a content hash"
    return None


def files_doc(data: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """The index's `files` mapping as parsed, or the refusal's key and problem."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return None, "(root): not a valid export index (not JSON)"
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict):
        return None, "files: not a valid export index (no `files` mapping)"
    return doc["files"], None


def edits_doc(data: bytes) -> Any:
    """The index's `edits` as parsed (None: none, or an index `files_doc` refuses already)."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return doc.get("edits") if isinstance(doc, dict) else None


def edit_is_the_exports(rel: object, spec: object, layout: Layout) -> bool:
    """An `edits` entry is one the export makes: entries of the base's kustomization.yaml, or GPU_PLATFORM_ keys of
    the overlay's cluster-vars, each in its own file."""
    path = normalized(rel)
    if path is None or not path.endswith((".yaml", ".yml")) or not isinstance(spec, dict) or len(spec) != 1:
        return False
    resources, data = spec.get("resources"), spec.get("data")
    if isinstance(resources, list):
        return (all(isinstance(e, str) and EXPORTED_NAME.fullmatch(e) for e in resources)
                and posixpath.dirname(path) == layout.entry_dir
                and posixpath.basename(path) in ("kustomization.yaml", "kustomization.yml"))
    if isinstance(data, dict):
        overlay = layout.bootstrap_path.removeprefix("./").strip("/")
        return (all(isinstance(k, str) and k.startswith("GPU_PLATFORM_") and isinstance(v, str)
                    for k, v in data.items())
                and posixpath.dirname(path) == overlay)
    return False


def has_shared_mark(data: bytes) -> bool:
    """The file starts with the export's generated header for a shared base, however the header was wrapped."""
    comments = []
    for line in data[:2000].decode("utf-8", errors="replace").splitlines():
        if line.startswith("#"):
            comments.append(line.lstrip("#").strip())
        elif line.strip() not in ("", "---"):
            break
    return headers.SHARED_MARK.strip() in " ".join(comments)


def same_index(current: bytes, content: bytes, settled: Callable[[str, str, str], bool] | None = None) -> bool:
    """The two indexes say the same. `settled(file, recorded, new)`: a file whose recorded hash differs from the new
    one is the same content all the same (a report an older export wrote, under its older header)."""
    try:
        old, new = json.loads(current), json.loads(content)
    except (ValueError, RecursionError):
        return False
    if old == new or settled is None or not isinstance(old, dict) or not isinstance(new, dict):
        return old == new
    old_files, new_files = old.get("files"), new.get("files")
    if not isinstance(old_files, dict) or not isinstance(new_files, dict) or set(old_files) != set(new_files):
        return False
    if {k: v for k, v in old.items() if k != "files"} != {k: v for k, v in new.items() if k != "files"}:
        return False
    return all(old_files[rel] == digest or settled(rel, str(old_files[rel]), digest)
               for rel, digest in new_files.items())
