"""The trees fitted to the repository before the walk: restyled to its yamllint, and the export's lines placed in the
repository's own hand-written files, told apart from the user's own lines there.

- `place`: a shared base's `kustomization.yaml` entries and the keys its tokens need in the overlay's `cluster-vars`,
  from what OUT holds now: the file with exactly those lines added (and those its last export added but no longer
  needs taken out), every other byte as it is (gitops/repo/edits.py). It joins the tree's files as `edited`: written
  without the owned files' ownership check, recorded in the index under `edits`, compared by `--check` byte for byte.
- `restyle`: with the repository's own yamllint configuration (gitops/repo/lintconfig.py finds it), the trees render in
  its style: header lines wrapped or left out to fit its line length, lists indented as its `indent-sequences` says;
  the same configuration then judges every YAML file the run writes (gitops/repo/repository_lint.py)."""

from __future__ import annotations

import json
import posixpath
from pathlib import Path
from typing import Any

from gitops.index import has_shared_mark, normalized
from gitops.repo import edits, lintconfig
from gitops.repo.out_folder import OwnershipError, read_regular
from gitops.tree import HeaderStyle, Tree, render_files
from model.flux_graph import CLUSTER_VARS
from model.safe_yaml import DocumentsError, yaml_documents

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")


def _read(out: Path, rel: str) -> tuple[bytes | None, str | None]:
    try:
        return read_regular(out, rel), None
    except OwnershipError as exc:
        return None, exc.lines[0]


def restyle(trees: list[Tree], out: Path) -> list[str]:
    """Render every tree in the repository's style; the problem lines when its configuration is not usable."""
    found, refused = lintconfig.repository_lint(out)
    if found is None:
        return refused
    _, lint = found
    indent = {True: 2, False: 0}.get(lint.indent_sequences) if isinstance(lint.indent_sequences, bool) else None
    style = HeaderStyle(line_length=lint.line_length_max, sequence_indent=indent)
    for tree in trees:
        tree.style = style
        render_files(tree)
    return []


def cluster_vars_file(out: Path, tree: Tree) -> tuple[str | None, str]:
    """The overlay's file that sets its `cluster-vars` values (a patch or a resource its kustomization lists, inside
    the overlay), or None and the line saying why."""
    overlay = tree.layout.bootstrap_path.removeprefix("./").strip("/")
    kfile = next((f"{overlay}/{name}" for name in KUSTOMIZATION_FILES if (out / overlay / name).is_file()), None)
    hint = (f"hint: add a patch of ConfigMap {CLUSTER_VARS} with a data: block to {overlay}/ (listed under its "
            "kustomization's patches), where each stack's values go")
    if kfile is None:
        return None, f"{out / overlay}: no kustomization.yaml; the stack's cluster-vars values have no place; {hint}"
    data, unreadable = _read(out, kfile)
    if unreadable or data is None:
        return None, unreadable or f"{out / kfile}: cannot be read; {hint}"
    try:
        docs = [d for d in yaml_documents(data) if isinstance(d, dict)]
    except DocumentsError as exc:
        return None, f"{out / kfile}: (root): not readable as YAML ({exc.problem}); {hint}"
    doc: dict[str, Any] = docs[0] if docs else {}
    candidates: list[str] = []
    for key in ("patches", "patchesStrategicMerge", "resources"):
        for item in doc.get(key) or [] if isinstance(doc.get(key), list) else []:
            path = item.get("path") if isinstance(item, dict) else item
            if isinstance(path, str) and path.endswith((".yaml", ".yml")):
                candidates.append(path)
    for path in candidates:
        rel = normalized(posixpath.normpath(posixpath.join(overlay, path)))
        if rel is None or not rel.startswith(overlay + "/"):
            continue  # only the overlay's own files are this stack's
        content, unreadable = _read(out, rel)
        if unreadable:  # a symlink, a folder: never read through, and said as such
            return None, unreadable
        if content is None:
            continue
        try:
            if _sets_cluster_vars(yaml_documents(content)):
                return rel, ""
        except DocumentsError as exc:  # the patch may well be the one: say what is wrong with it, not that none is
            return None, (f"{out / rel}: (root): not readable as YAML ({exc.problem or exc.reason}), so the export "
                          f"cannot tell whether it sets ConfigMap {CLUSTER_VARS}; hint: fix the file (kubectl "
                          f"kustomize {overlay} shows where)")
    patches = doc.get("patches")
    inline = [i["patch"] for i in (patches if isinstance(patches, list) else [])
              if isinstance(i, dict) and isinstance(i.get("patch"), str)]
    for patch in inline:
        try:
            found = _sets_cluster_vars(yaml_documents(patch.encode()))
        except DocumentsError:
            found = False
        if found:
            return None, (f"{out / kfile}: patches: ConfigMap {CLUSTER_VARS} is patched inline (`patch:`), which the "
                          f"export does not edit; hint: move that patch into a file of {overlay}/ and list it as "
                          "`- path: <file>`")
    return None, f"{out / kfile}: patches: no file of this overlay sets ConfigMap {CLUSTER_VARS}; {hint}"


def _sets_cluster_vars(docs: tuple[Any, ...]) -> bool:
    return any(isinstance(d, dict) and d.get("kind") == "ConfigMap" and isinstance(d.get("metadata"), dict)
               and d["metadata"].get("name") == CLUSTER_VARS for d in docs)


def place(out: Path, tree: Tree, tokens: dict[str, str], exports_before: dict[str, dict[str, Any]],
          exports_own: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """The stack's lines in the repository's own files, placed in them as OUT holds them; one line per problem.
    `exports_before`: the lines this stack's last export recorded (its index's `edits`). `exports_own`: the lines any
    stack of the run records as the export's (default: this stack's, `exports_before`); a line already in the file
    that no index records is the user's (`_users_own`)."""
    wanted = dict(tree.edits)
    problems: list[str] = []
    if tokens:
        rel, why = cluster_vars_file(out, tree)
        if rel is None:
            return [why.replace("; hint:", f" (the export sets {', '.join(sorted(tokens))} there); hint:", 1)]
        wanted[rel] = {"data": dict(sorted(tokens.items()))}
    recorded: dict[str, dict[str, Any]] = {}
    for rel in sorted(set(wanted) | set(exports_before)):
        current, unreadable = _read(out, rel)
        if unreadable:
            problems.append(unreadable)
            continue
        if current is None:
            if rel in wanted:
                # the base's kustomization.yaml is where gitops.entryDir points: a wrong key is as likely as a loss
                elsewhere = (", or point gitops.entryDir (every stack sharing the base) at the folder that holds it"
                             if rel == f"{tree.layout.entry_dir}/kustomization.yaml" else "")
                problems.append(f"{out / rel}: missing; the export keeps {_what(wanted[rel])} in it; hint: restore it "
                                f"from git{elsewhere}")
            continue
        forged = _not_the_exports(out, rel, exports_before.get(rel, {}), wanted.get(rel, {}))
        if forged:
            problems.append(forged)
            continue
        try:
            tree.files[rel] = _edited(current, exports_before.get(rel, {}), wanted.get(rel, {}))
            mine = _users_own(current, wanted.get(rel, {}), (exports_own or exports_before).get(rel, {}), tree.stack)
        except edits.EditRefused as exc:
            problems.append(exc.line(str(out / rel)))
            continue
        tree.edited.add(rel)
        exports = _without(wanted.get(rel, {}), mine)
        if exports:
            recorded[rel] = exports
    tree.edits = recorded
    return problems


def _users_own(current: bytes, wanted: dict[str, Any], exports: dict[str, Any], stack: str) -> dict[str, Any]:
    """What of `wanted` the file already holds and no index records as the export's: the user wrote it, so the export
    leaves it where it is and never records it (`--remove` keeps it). A value of the user's that differs from the
    export's is refused (EditRefused): the export never overwrites what it does not own."""
    theirs: dict[str, Any] = {}
    if wanted.get("resources"):
        listed = edits.listed_resources(current)
        theirs["resources"] = [e for e in wanted["resources"] if e not in exports.get("resources", [])
                               and any(edits.same_resource(item, e) for item in listed)]
    if wanted.get("data"):
        found = edits.data_values(current)
        keys = [k for k in wanted["data"] if k in found and k not in exports.get("data", {})]
        for key in keys:
            if found[key] != wanted["data"][key]:
                raise edits.EditRefused(
                    f"data.{key}", f"{json.dumps(found[key])} was set by hand and the export sets "
                    f"{json.dumps(wanted['data'][key])}; the export never overwrites a value it did not write",
                    f"delete the line `{key}: ...` to hand the key to the export, or change Pulumi.{stack}.yaml so "
                    f"the export sets {json.dumps(found[key])}")
        theirs["data"] = keys
    return theirs


def _without(spec: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """`spec` (an `edits` entry) without the user's own lines."""
    left: dict[str, Any] = {}
    resources = [e for e in spec.get("resources", []) if e not in theirs.get("resources", [])]
    data = {k: v for k, v in spec.get("data", {}).items() if k not in theirs.get("data", [])}
    if resources:
        left["resources"] = resources
    if data:
        left["data"] = data
    return left


def _not_the_exports(out: Path, rel: str, before: dict[str, Any], wanted: dict[str, Any]) -> str | None:
    """An entry the index says the export added, naming a file that is the repository's own (no generated header):
    a forged index must never take the repository's own entry out."""
    folder = posixpath.dirname(rel)
    for entry in before.get("resources", []):
        if entry in wanted.get("resources", []):
            continue
        data, _ = _read(out, posixpath.join(folder, entry))
        if data is not None and not has_shared_mark(data):
            return (f"{out / rel}: resources: `{entry}`: the index says the export added it, but {folder}/{entry} is "
                    "not a file the export wrote; the export never takes out an entry of the repository's own; "
                    "hint: restore the index from git")
    return None


def _what(spec: dict[str, Any]) -> str:
    if "resources" in spec:
        return "the entries " + ", ".join(spec["resources"])
    return "the keys " + ", ".join(spec.get("data", {}))


def _edited(current: bytes, before: dict[str, Any], wanted: dict[str, Any]) -> bytes:
    """`current` without the lines the last export added and no longer needs, with the ones it needs now."""
    text = current
    for entry in before.get("resources", []):
        if entry not in wanted.get("resources", []):
            text = edits.remove_resource(text, entry)
    stale = [k for k in before.get("data", {}) if k not in wanted.get("data", {})]
    if stale:
        text = edits.remove_data_keys(text, stale)
    for entry in wanted.get("resources", []):
        text = edits.add_resource(text, entry)
    if wanted.get("data"):
        text = edits.set_data_keys(text, wanted["data"])
    return text
