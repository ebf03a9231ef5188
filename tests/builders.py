"""The tests' shared builders and lookups: small Kubernetes and Flux documents for the tests that write repositories
by hand (`dump`, `ks`, `cm`: each writes only what it is given, a field a test does not ask for is absent, not
defaulted), and the program's registrations by type and name (`registration`, `registrations`)."""

from __future__ import annotations

from typing import Any

import yaml

from gitops.engine.program import Capture, Registration


def dump(*docs: Any) -> bytes:
    """The documents as one multi-document YAML file, keys in the order given."""
    return yaml.safe_dump_all(list(docs), sort_keys=False).encode()


def ks(name: str, path: str, namespace: str | None = "flux-system", *, source_ref: bool = True,
       source_namespace: str | None = None, prune: bool | None = None, interval: str | None = None,
       **spec: Any) -> dict[str, Any]:
    """A Flux Kustomization of `path`, in `namespace` (None: no metadata.namespace), from the bootstrap GitRepository
    `flux-system` (`source_ref=False`: no sourceRef at all); the sourceRef names the source's namespace only when
    `source_namespace` is given; `prune` and `interval` are set only when given (in that order, after path and
    sourceRef); `spec` adds any other field."""
    source = {"kind": "GitRepository", "name": "flux-system",
              **({"namespace": source_namespace} if source_namespace is not None else {})}
    fields = {**({"sourceRef": source} if source_ref else {}),
              **({"prune": prune} if prune is not None else {}),
              **({"interval": interval} if interval is not None else {})}
    return {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, **({"namespace": namespace} if namespace is not None else {})},
            "spec": {"path": path, **fields, **spec}}


def cm(name: str, namespace: str | None = None, *, empty_data: bool = False, **data: str) -> dict[str, Any]:
    """A ConfigMap, in `namespace` when one is given (None: no metadata.namespace). `data` holds the keyword
    arguments; without any, the ConfigMap has no data field, or `data: {}` with `empty_data=True`."""
    meta = {"name": name, **({"namespace": namespace} if namespace is not None else {})}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            **({"data": data} if data or empty_data else {})}


def registration(capture: Capture, type_: str, name: str) -> Registration:
    """The one resource of this type and name the program registered."""
    found = [r for r in capture.registrations if r.type == type_ and r.name == name]
    assert len(found) == 1, f"{len(found)} registrations of {type_} named {name!r}"
    return found[0]


def registrations(capture: Capture, type_: str) -> list[Registration]:
    """Every resource of this type the program registered, in registration order."""
    return [r for r in capture.registrations if r.type == type_]
