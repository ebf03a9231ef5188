"""The policies, as pure functions over resources (type, name, urn, props). No Pulumi import here:

- `policy/__main__.py` wraps them for `pulumi preview --policy-pack policy` (pulumi-policy, its own venv);
- the export (gitops/export.py) runs them over what the mock engine captured and refuses to write on a
  mandatory violation.

The first four mirror the cluster's Kyverno app policies (Enforce); the rest keep the GPU plugin's non-choices, and
the DRA route's claims to the namespaces labelled for admin access.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from model.labels import ADMIN_ACCESS_LABEL, APP_NAMESPACE_LABEL, PLUGIN_REMOVED_LABEL, SHARED_DEV_NUM_REASON_ANNOTATION

PLUGIN_IMAGE = "intel-gpu-plugin"

_POD_SPEC_PATHS = {
    "Pod": ("spec",),
    "Deployment": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    # Kyverno auto-generates Pod rules for it too: the cluster refuses its template as it refuses a Pod
    "ReplicationController": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}


@dataclass(frozen=True)
class Resource:
    type: str  # Pulumi type token, e.g. kubernetes:apps/v1:Deployment
    name: str
    urn: str
    props: Mapping[str, Any]

    @property
    def kind(self) -> str:
        return self.type.rsplit(":", 1)[-1]

    @property
    def namespace(self) -> str | None:
        return (self.props.get("metadata") or {}).get("namespace")

    @property
    def ref(self) -> str:
        meta = self.props.get("metadata") or {}
        ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
        return f"{self.kind} {ns}{meta.get('name', self.name)}"


def from_struct(value: Any) -> Any:
    """Props as the Pulumi analyzer delivers them: a protobuf Struct, whose numbers are all doubles (a probe's
    `timeoutSeconds: 5` arrives as 5.0), behind pulumi-policy's read-only proxies (Mapping and Sequence, not dict and
    list). Plain dicts and lists again, and Kubernetes integers integers, so the rules see what was declared."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {k: from_struct(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [from_struct(v) for v in value]
    return value


@dataclass(frozen=True)
class Settings:
    egress_class_label: str = "egress-class"
    auth_mode_label: str = "auth-mode"


@dataclass(frozen=True)
class Violation:
    policy: str
    resource: Resource
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"policy {self.policy}: {self.resource.ref} ({self.resource.name}): {self.problem}; hint: {self.fix}"


Check = Callable[[list[Resource], Settings], Iterable[tuple[Resource, str]]]


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    fix: str
    check: Check
    mandatory: bool = True


def _dig(props: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = props
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def pod_spec(resource: Resource) -> Mapping[str, Any] | None:
    path = _POD_SPEC_PATHS.get(resource.kind)
    spec = _dig(resource.props, path) if path else None
    return spec if isinstance(spec, Mapping) else None


def containers(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


# Keyed by metadata.name as the manifest holds it: any value, resources being untrusted input.
def app_namespaces(resources: list[Resource]) -> dict[Any, Resource]:
    return {
        (r.props.get("metadata") or {}).get("name"): r for r in resources
        if r.kind == "Namespace"
        and ((r.props.get("metadata") or {}).get("labels") or {}).get(APP_NAMESPACE_LABEL) == "true"
    }


def _workloads(resources: list[Resource]) -> Iterator[tuple[Resource, Mapping[str, Any]]]:
    for r in resources:
        spec = pod_spec(r)
        if spec is not None:
            yield r, spec


def _app_workloads(resources: list[Resource]) -> Iterator[tuple[Resource, Mapping[str, Any]]]:
    """The workloads in app namespaces, with their pod specs."""
    apps = app_namespaces(resources)
    return ((r, spec) for r, spec in _workloads(resources) if r.namespace in apps)


def _app_containers(resources: list[Resource]) -> Iterator[tuple[Resource, Mapping[str, Any]]]:
    """Every container of the workloads in app namespaces."""
    return ((r, c) for r, spec in _app_workloads(resources) for c in containers(spec))


def _restrict_host_namespaces(resources: list[Resource], _: Settings):
    for r, spec in _app_workloads(resources):
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(field) is True:
                yield r, f"{field}: true in app namespace {r.namespace}"
        for c in containers(spec):
            if (c.get("securityContext") or {}).get("privileged") is True:
                yield r, f"container {c.get('name')} is privileged in app namespace {r.namespace}"


def _missing_label(resources: list[Resource], key: str):
    for name, ns in sorted(app_namespaces(resources).items()):
        if not ((ns.props.get("metadata") or {}).get("labels") or {}).get(key):
            yield ns, f"app namespace {name} has no {key!r} label"


def _require_egress_class_label(resources: list[Resource], settings: Settings):
    return _missing_label(resources, settings.egress_class_label)


def _require_auth_mode_label(resources: list[Resource], settings: Settings):
    return _missing_label(resources, settings.auth_mode_label)


def _is_default_deny(r: Resource) -> bool:
    spec = r.props.get("spec") or {}
    selector = spec.get("podSelector")
    # Absent (or null), it is the empty selector, every Pod: the API server stores it as {} (k8s.io/api networking/v1)
    selector = {} if selector is None else selector
    empty_selector = (isinstance(selector, Mapping) and not selector.get("matchLabels")
                      and not selector.get("matchExpressions"))
    return (empty_selector and {"Ingress", "Egress"} <= set(spec.get("policyTypes") or [])
            and not spec.get("ingress") and not spec.get("egress"))


def _require_default_deny(resources: list[Resource], _: Settings):
    denied = {r.namespace for r in resources if r.kind == "NetworkPolicy" and _is_default_deny(r)}
    for name, ns in sorted(app_namespaces(resources).items()):
        if name not in denied:
            yield ns, (
                f"app namespace {name} has no default-deny NetworkPolicy (podSelector {{}}, Ingress+Egress, no rules)")


def _is_plugin(container: Mapping[str, Any]) -> bool:
    return PLUGIN_IMAGE in str(container.get("image", ""))


def _plugin_containers(resources: list[Resource]):
    for r, spec in _workloads(resources):
        for c in containers(spec):
            if _is_plugin(c):
                yield r, spec, c


def flag(arg: str) -> tuple[str, str | None]:
    """`-name=value` / `--name` -> (name, value or None), as the plugin's Go flag parser reads it."""
    name, _, value = arg.lstrip("-").partition("=")
    return name, (value or None)


def _no_health_management(resources: list[Resource], _: Settings):
    for r, _spec, c in _plugin_containers(resources):
        if any(flag(str(a))[0] == "health-management" for a in c.get("args") or []):
            yield r, f"container {c.get('name')} runs -health-management (Level-Zero sidecar opens the device: EPERM)"


def _read_only_device_mounts(resources: list[Resource], _: Settings):
    for r, _spec, c in _plugin_containers(resources):
        for m in c.get("volumeMounts") or []:
            if m.get("mountPath") in ("/dev/dri", "/sys/class/drm") and m.get("readOnly") is not True:
                yield r, f"container {c.get('name')} mounts {m.get('mountPath')} writable"


def _shared_dev_num_reason(resources: list[Resource], _: Settings):
    for r, _spec, c in _plugin_containers(resources):
        for a in c.get("args") or []:
            name, value = flag(str(a))
            # int() sees ASCII digits only (`²` is a digit to isdigit, not to int): anything else needs the reason
            digits = value if value is not None and value.isascii() and value.isdigit() else None
            if name == "shared-dev-num" and (digits is None or int(digits) > 1):
                annotations = (r.props.get("metadata") or {}).get("annotations") or {}
                if not str(annotations.get(SHARED_DEV_NUM_REASON_ANNOTATION, "")).strip():
                    yield r, f"{a} without a recorded reason"


def _pinned_images(resources: list[Resource], _: Settings):
    for r, spec in _workloads(resources):
        for c in containers(spec):
            image = c.get("image")
            if not image:
                yield r, f"container {c.get('name')} has no image"
                continue
            name_part, _at, digest = str(image).partition("@")
            last = name_part.rsplit("/", 1)[-1]
            tag = last.partition(":")[2]
            if tag == "latest":
                yield r, f"container {c.get('name')} uses {image!r}: ':latest' is not a pin"
            elif not tag and not digest:
                yield r, f"container {c.get('name')} uses {image!r} with no tag (that means :latest)"


# Capabilities no GPU app needs, whose return would undo `drop: [ALL]` where it matters most.
DANGEROUS_CAPABILITIES = frozenset({"NET_RAW", "NET_ADMIN", "SYS_ADMIN", "SYS_PTRACE", "SYS_MODULE", "SYS_RAWIO",
                                    "BPF", "PERFMON", "DAC_READ_SEARCH", "SYS_BOOT", "MKNOD"})
MIN_PROBE_TIMEOUT_SECONDS = 2


def _no_service_account_token(resources: list[Resource], _: Settings):
    apps = app_namespaces(resources)
    for r, spec in _workloads(resources):
        plugin = any(_is_plugin(c) for c in containers(spec))
        if (r.namespace in apps or plugin) and spec.get("automountServiceAccountToken") is not False:
            yield r, "the pod mounts a service-account token it never uses (automountServiceAccountToken is not false)"


def _drop_all_capabilities(resources: list[Resource], _: Settings):
    for r, c in _app_containers(resources):
        caps = (c.get("securityContext") or {}).get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            yield r, f"container {c.get('name')} keeps the runtime's default capabilities (no drop: [ALL])"
        back = sorted(DANGEROUS_CAPABILITIES & set(caps.get("add") or []))
        if back:
            yield r, f"container {c.get('name')} adds back {', '.join(back)}"


def _probe_timeouts(resources: list[Resource], _: Settings):
    for r, c in _app_containers(resources):
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            p = c.get(probe)
            if isinstance(p, Mapping) and not (isinstance(p.get("timeoutSeconds"), int)
                                               and p["timeoutSeconds"] >= MIN_PROBE_TIMEOUT_SECONDS):
                yield r, (f"container {c.get('name')} {probe} has timeoutSeconds "
                          f"{p.get('timeoutSeconds', '1 (default)')}, below {MIN_PROBE_TIMEOUT_SECONDS}: "
                          f"a busy but healthy app fails it")


def _plugin_namespace_default_deny(resources: list[Resource], _: Settings):
    denied = {r.namespace for r in resources if r.kind == "NetworkPolicy" and _is_default_deny(r)}
    for r, _spec, _c in _plugin_containers(resources):
        if r.namespace not in denied:
            yield r, (
                f"namespace {r.namespace} of the GPU plugin has no default-deny NetworkPolicy (it needs no network)")


# gpu.route: dra, step 5: the export labels the DRA driver's namespace with PLUGIN_REMOVED_LABEL, and from then on no
# Intel GPU device plugin may run beside the driver (components/intel_gpu_dra.py)
DRA_DRIVER_NAMESPACE = "intel-gpu-resource-driver"
_CLAIM_REQUESTS = {"ResourceClaim": ("spec", "devices", "requests"),
                   "ResourceClaimTemplate": ("spec", "spec", "devices", "requests")}


def asks_admin_access(resource: Resource) -> bool:
    """A claim (or claim template) with a request, or a request's alternative, that asks for adminAccess."""
    path = _CLAIM_REQUESTS.get(resource.kind)
    requests = _dig(resource.props, path) if path else None
    for request in requests if isinstance(requests, Sequence) and not isinstance(requests, str) else []:
        if not isinstance(request, Mapping):
            continue
        exactly = request.get("exactly")
        if isinstance(exactly, Mapping) and exactly.get("adminAccess") is True:
            return True
        alternatives = request.get("firstAvailable")
        if isinstance(alternatives, Sequence) and any(isinstance(a, Mapping) and a.get("adminAccess") is True
                                                      for a in alternatives):
            return True
    return False


def _admin_access_labelled(resources: list[Resource], _: Settings):
    """Admin access reaches every device of the class, in use by another claim or not: Kubernetes admits it only in
    a namespace labelled for it, and the export labels only the namespaces the stack names."""
    labelled = {(r.props.get("metadata") or {}).get("name") for r in resources if r.kind == "Namespace"
                and ((r.props.get("metadata") or {}).get("labels") or {}).get(ADMIN_ACCESS_LABEL) == "true"}
    for r in resources:
        if asks_admin_access(r) and r.namespace not in labelled:
            yield r, (f"asks for adminAccess in namespace {r.namespace}, which is not labelled {ADMIN_ACCESS_LABEL}: "
                      "\"true\"; the API server refuses such a claim there")


def _plugin_not_beside_driver(resources: list[Resource], _: Settings):
    """After the DRA route's step 5 the plugin and the driver would each hand out the same iGPU, neither counting the
    other's use: a plugin workload anywhere is refused once the driver's namespace says the plugin was removed."""
    removed = any(r.kind == "Namespace" and (r.props.get("metadata") or {}).get("name") == DRA_DRIVER_NAMESPACE
                  and ((r.props.get("metadata") or {}).get("labels") or {}).get(PLUGIN_REMOVED_LABEL) == "true"
                  for r in resources)
    if not removed:
        return
    for r, _spec, _c in _plugin_containers(resources):
        yield r, (f"runs the Intel GPU device plugin beside the DRA driver, whose namespace {DRA_DRIVER_NAMESPACE} "
                  f"says the plugin was removed ({PLUGIN_REMOVED_LABEL}); both would hand out the same iGPU")


RULES: list[Rule] = [
    Rule("restrict-host-namespaces",
         "No privileged containers, hostNetwork, hostPID or hostIPC in namespaces labelled app-namespace: \"true\".",
         "drop privileged/host* from the pod spec; GPU access comes from the device plugin's resource",
         _restrict_host_namespaces),
    Rule("require-egress-class-label", "App namespaces carry the egress-class label the network policies key on.",
         "set plex.egressClass (and appPolicy.egressClassLabel) in the stack config", _require_egress_class_label),
    Rule("require-auth-mode-label", "App namespaces carry the auth-mode label the ingress policies key on.",
         "set plex.authMode (and appPolicy.authModeLabel) in the stack config", _require_auth_mode_label),
    Rule("require-default-deny-baseline",
         "Every app namespace has a default-deny NetworkPolicy for ingress and egress.",
         "declare a NetworkPolicy with podSelector {} and policyTypes [Ingress, Egress] and no rules",
         _require_default_deny),
    Rule("intel-gpu-plugin-no-health-management", "The GPU plugin never runs -health-management.",
         "remove -health-management from intelGpuPlugin.extraArgs", _no_health_management),
    Rule("intel-gpu-plugin-read-only-device-mounts", "The GPU plugin mounts /dev/dri and /sys/class/drm read-only.",
         "set readOnly: true on the plugin's /dev/dri and /sys/class/drm mounts", _read_only_device_mounts),
    Rule("intel-gpu-plugin-shared-dev-num-reason", "-shared-dev-num above 1 only with a recorded reason.",
         f"set intelGpuPlugin.sharedDevNumReason (exported as the {SHARED_DEV_NUM_REASON_ANNOTATION} annotation)",
         _shared_dev_num_reason),
    Rule("pinned-image-tags", "Every container image has an explicit tag or digest, never :latest.",
         "pin an exact version tag (model/images.py or the stack config)", _pinned_images),
    Rule("no-service-account-token", "App workloads and the GPU plugin do not mount a service-account token.",
         "set automountServiceAccountToken: false on the pod (components/gpu_app.py, components/intel_gpu_plugin.py)",
         _no_service_account_token),
    Rule("drop-all-capabilities", "App containers drop ALL capabilities and never add back NET_RAW or other "
         "host-level ones.", "keep drop: [ALL] and add back only what the image's init needs (the app's capabilities)",
         _drop_all_capabilities),
    Rule("probe-timeouts", f"App probes wait at least {MIN_PROBE_TIMEOUT_SECONDS} s for an answer.",
         "set the app's probe.timeoutSeconds", _probe_timeouts),
    Rule("intel-gpu-plugin-namespace-default-deny", "The GPU plugin's namespace denies all network traffic.",
         "declare a default-deny NetworkPolicy in the plugin's namespace (components/intel_gpu_plugin.py)",
         _plugin_namespace_default_deny),
    Rule("dra-admin-access-labelled-namespace",
         f"A DRA claim asks for adminAccess only in a namespace labelled {ADMIN_ACCESS_LABEL}: \"true\".",
         "name the app's namespace in gpu.dra.adminAccessNamespaces (the export labels it), or use draAllocation: "
         "exclusive", _admin_access_labelled),
    Rule("intel-gpu-plugin-not-beside-dra-driver",
         "After the DRA route's step 5 no Intel GPU device plugin runs beside the DRA driver.",
         "remove the plugin from the repository (gpu.dra.stage: plugin-removed takes the export's own away)",
         _plugin_not_beside_driver),
]


def evaluate(resources: list[Resource], settings: Settings, rules: list[Rule] = RULES) -> list[Violation]:
    found = []
    for rule in rules:
        for resource, problem in rule.check(resources, settings):
            found.append(Violation(rule.name, resource, problem, rule.fix))
    return found
