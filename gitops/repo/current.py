"""What OUT holds now for a stack, as the last export's index lists it: its objects by identity, the stack outputs
the index recorded, and notes on what the export would refuse (hand edits, hand-written files in the way). Reads
only; the preview compares it with the program's tree (gitops/plan/)."""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitops.flux.inventory import ObjectId
from gitops.index import matches_record, same_content, suite_path
from gitops.repo.out_folder import OwnershipError, read_index, read_regular
from gitops.tree import KUSTOMIZE_FILE, Tree
from model.safe_yaml import DocumentsError, escaped, yaml_documents


def _load_objects(out: Path, rel: str, data: bytes) -> list[dict[str, Any]]:
    """The Kubernetes objects of one owned YAML file under OUT (untrusted: a bad file is one error line)."""
    hint = f"hint: restore it from git (`git checkout -- {rel}`), then run the command again"
    try:
        docs = yaml_documents(data)
    except DocumentsError as exc:
        raise OwnershipError([{
            "invalid": f"{out / rel}: (root): not valid YAML ({escaped(' '.join(exc.problem.split()))}); the export "
                       f"would refuse it as a hand edit; {hint}",
            "unreadable": f"{out / rel}: (root): not readable as YAML ({exc.problem}); {hint}",
        }.get(exc.reason, f"{out / rel}: (root): expands through its aliases beyond any manifest; {hint}")]) from None
    return [d for d in docs if isinstance(d, dict) and d.get("kind") and isinstance(d.get("metadata"), dict)]


@dataclass
class Current:
    """What the repository holds now for the stack: its objects by identity, and the outputs the index recorded."""

    index: str | None
    objects: dict[ObjectId, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    outputs: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


def recorded_outputs(index_data: bytes) -> dict[str, Any] | None:
    try:
        doc = json.loads(index_data)
    except (ValueError, RecursionError):
        doc = {}
    outputs = doc.get("stackOutputs") if isinstance(doc, dict) else None
    return outputs if isinstance(outputs, dict) else None


def read_current(out: Path, tree: Tree) -> Current:
    """The owned objects of `tree.stack` in OUT, as the last export's index lists them. Reads only; a tampered
    index or an unreadable owned file is an OwnershipError (one line each)."""
    if not out.is_dir():
        return Current(index=None)
    owned = read_index(out, tree)
    index_data = read_regular(out, tree.index_path)
    current = Current(index=tree.index_path if index_data is not None else None)
    if index_data is not None:
        current.outputs = recorded_outputs(index_data)
    for rel in sorted(owned):
        # Every owned file, kustomization.yaml and DELIVERY.md too: the export refuses a hand edit of any of them.
        data = read_regular(out, rel)
        if data is None:
            current.notes.append(f"{rel}: listed in the export index but missing; the export writes it again")
            continue
        if not matches_record(rel, data, owned[rel]):
            current.notes.append(f"{rel}: edited by hand since the last export: the export refuses to overwrite it "
                                 f"(hint: put the change into the program or stack config, then `git checkout` it)")
        if not rel.endswith(".yaml") or posixpath.basename(rel) == KUSTOMIZE_FILE or rel == suite_path(tree.layout):
            continue  # DELIVERY.md, a kustomization, the post-merge suite: no cluster objects in them
        for manifest in _load_objects(out, rel, data):
            key = ObjectId.of(manifest)
            if key in current.objects:
                current.notes.append(f"{rel}: {key} is also in "
                                     f"{current.objects[key][0]}; the preview compares with the last one")
            current.objects[key] = (rel, manifest)
    for obj in tree.objects:  # a file the export wants to write where a hand-written one stands: it would refuse
        if obj.path in owned:
            continue
        data = read_regular(out, obj.path)
        if data is not None and not same_content(obj.path, data, tree.files[obj.path]):
            current.notes.append(f"{obj.path}: exists and was not written by this export: the export refuses to "
                                 f"overwrite it (hint: move it away or delete it)")
    return current
