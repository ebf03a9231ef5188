"""gpu.route: dra: no admin access outside the namespaces the stack names (gpu.dra.adminAccessNamespaces), anywhere
Flux's walk of the repository reaches. Admin access reaches every device of the class, in use by another claim or
not, and the namespace label `resource.kubernetes.io/admin-access: "true"` grants it to any claim in the namespace;
so both the label and a claim asking for it are refused outside the named namespaces, whoever wrote them. The
export's own objects are held to the same list by the config checks (model/config/stack.py)."""

from __future__ import annotations

from gitops.flux.inventory import FluxView
from model.labels import ADMIN_ACCESS_LABEL
from model.outputs import DraMigrationOutput
from model.safe_yaml import as_mapping
from policy.rules import Resource, asks_admin_access

_HINT = "name the namespace in gpu.dra.adminAccessNamespaces, or take admin access out of the repository"


def check_admin_access(after: FluxView, migration: DraMigrationOutput | None) -> list[str]:
    """One line per Namespace labelled for admin access, and per claim asking for it, outside the named ones."""
    if migration is None:
        return []
    named = set(migration.admin_access_namespaces)
    problems = []
    for oid, manifest in sorted(after.manifests.items()):
        labels = as_mapping(as_mapping(manifest.get("metadata")).get("labels"))
        origin = after.origins.get(oid, "?")
        if oid.kind == "Namespace" and oid.name not in named and labels.get(ADMIN_ACCESS_LABEL) == "true":
            problems.append(f"{origin}: {oid}: labelled {ADMIN_ACCESS_LABEL}: \"true\", which lets any claim there "
                            "reach every GPU of the class, in use or not, and the stack does not name it; hint: "
                            f"{_HINT}")
        resource = Resource(f"kubernetes:{manifest.get('apiVersion')}:{oid.kind}", oid.name, str(oid), manifest)
        if asks_admin_access(resource) and resource.namespace not in named:
            problems.append(f"{origin}: {oid}: asks for adminAccess in namespace {resource.namespace}, which the "
                            f"stack does not name; hint: {_HINT}")
    return problems
