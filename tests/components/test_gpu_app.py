"""GPU apps as one building block: Plex is one instance, a second app is config only; the gate, the capacity check,
the delivery and the hardening hold for every app."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLE, FIXTURES, evidence_for, make_project, repository
from gitops.export import main as export_main
from gitops.flux.build import RepoView
from gitops.flux.inventory import ObjectId
from gitops.flux.walk import walk_from_bootstrap as walk

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "plex-before-gpu-app"
TWO_APPS = (FIXTURES / "config" / "valid" / "plex-and-jellyfin.yaml").read_text()
DEV_NODES = ("k3s-dev-1", "k3s-dev-2")
DEPLOY = "kubernetes:apps/v1:Deployment"


def docs(folder: Path) -> dict[str, dict]:
    return {p.name: yaml.safe_load(p.read_text()) for p in sorted(folder.glob("*.yaml"))}


def with_the_listed_hardening(before: dict[str, dict]) -> dict[str, dict]:
    """Today's Plex objects plus exactly the hardening the GPU-app issue lists, nothing else."""
    expected = copy.deepcopy(before)
    pod = expected["deployment.plex.yaml"]["spec"]["template"]["spec"]
    pod["automountServiceAccountToken"] = False
    (container,) = pod["containers"]
    container["securityContext"]["capabilities"] = {
        "drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETUID"]}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        container[probe]["timeoutSeconds"] = 5
    return expected


def test_plex_differs_from_its_objects_before_gpu_apps_only_by_the_listed_hardening(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    assert export_main(["--project-dir", str(EXAMPLE), "--stack", "prod", "--out", str(out), "--quiet"]) == 0
    assert docs(out / "components/prod/plex") == with_the_listed_hardening(docs(GOLDEN))


def two_apps(tmp_path: Path, text: str = TWO_APPS, evidence: str | None = None) -> Path:
    return make_project(tmp_path / "project", {"dev": text}, {"dev": evidence} if evidence else None)


def export(tmp_path: Path, project: Path, out: Path | None = None) -> tuple[int, Path]:
    out = out or tmp_path / "out"
    out.mkdir(parents=True, exist_ok=True)
    return export_main(["--stack", "dev", "--out", str(out), "--quiet", "--lint", "--project-dir", str(project)]), out


def i915(out: Path, app: str) -> str | None:
    deployment = yaml.safe_load((out / f"components/dev/{app}/deployment.{app}.yaml").read_text())
    return deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"].get("gpu.intel.com/i915")


def test_a_second_gpu_app_is_config_only_and_gets_everything_plex_gets(tmp_path):
    code, out = export(tmp_path, two_apps(tmp_path))
    assert code == 0
    names = {p.name for p in (out / "components/dev/jellyfin").iterdir()}
    assert names == {p.name.replace("plex", "jellyfin") for p in (out / "components/dev/plex").iterdir()}
    namespace = yaml.safe_load((out / "components/dev/jellyfin/namespace.jellyfin.yaml").read_text())
    assert namespace["metadata"]["labels"] == {"app-namespace": "true", "egress-class": "internet",
                                               "auth-mode": "app-native"}
    ks = yaml.safe_load((out / "clusters/dev/gpu-platform/ks.jellyfin.yaml").read_text())
    assert ks["spec"]["path"] == "./components/dev/jellyfin" and ks["spec"]["wait"] is True
    # Jellyfin joined wave 1, which waits for wave 0 and for Plex (which joined wave 0).
    assert ks["spec"]["dependsOn"] == [{"name": "apps-wave-0"}, {"name": "plex"}]


def test_both_apps_request_the_device_only_with_complete_evidence(tmp_path):
    code, out = export(tmp_path, two_apps(tmp_path))
    assert code == 0 and i915(out, "plex") is None and i915(out, "jellyfin") is None
    partial = evidence_for("dev", {"k3s-dev-1": 1})
    code, out = export(tmp_path / "partial", two_apps(tmp_path / "partial", evidence=partial))
    assert code == 0 and i915(out, "plex") is None and i915(out, "jellyfin") is None
    complete = evidence_for("dev", {n: 1 for n in DEV_NODES})
    code, out = export(tmp_path / "complete", two_apps(tmp_path / "complete", evidence=complete))
    assert code == 0 and i915(out, "plex") == "1" and i915(out, "jellyfin") == "1"


def test_requests_that_do_not_fit_the_advertised_devices_are_refused_naming_the_apps_and_numbers(tmp_path, capsys):
    complete = evidence_for("dev", {n: 1 for n in DEV_NODES})
    greedy = TWO_APPS.replace("        gpu: intel-quicksync\n      delivery:\n        tier: apps-wave-1",
                              "        gpu: intel-quicksync\n        devices: 2\n"
                              "      delivery:\n        tier: apps-wave-1")
    assert greedy != TWO_APPS
    code, out = export(tmp_path, two_apps(tmp_path, greedy, complete))
    assert code == 2 and list(out.iterdir()) == []
    assert capsys.readouterr().err.splitlines() == [
        "error: Pulumi.dev.yaml: gpu-platform:apps[0].hardware.devices: 2: jellyfin does not fit: the apps on the "
        "device-plugin path request 3 gpu.intel.com/i915 in all (jellyfin (2), plex (1)), the nodes advertise "
        "k3s-dev-1=1, k3s-dev-2=1 (evidence/dev.yaml), and a pod takes its devices from one node; jellyfin would "
        "stay Unschedulable; hint: hold an app back with intelGpuAccess: host-path, request fewer devices, or raise "
        "the plugin's sharedDevNum (with its reason) and record new evidence",
        "nothing was written",
    ]
    # Shared devices make room: the same requests fit once the nodes advertise 2 each.
    shared = evidence_for("dev", {n: 2 for n in DEV_NODES})
    code, _ = export(tmp_path / "shared", two_apps(tmp_path / "shared", greedy, shared))
    assert code == 0


def test_the_gate_names_the_app_and_its_key(tmp_path, capsys):
    forced = TWO_APPS.replace("        gpu: intel-quicksync\n      delivery:",
                              "        gpu: intel-quicksync\n        intelGpuAccess: device-plugin\n      delivery:")
    code, _ = export(tmp_path, two_apps(tmp_path, forced))
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        'error: Pulumi.dev.yaml: gpu-platform:apps[0].hardware.intelGpuAccess: "device-plugin": refused: there is no '
        "evidence that the nodes advertise gpu.intel.com/i915 (evidence/dev.yaml is missing); requesting it now would "
        "leave jellyfin Unschedulable, its Kustomization never Ready, and every tier that waits for it stalled; "
        "hint: merge the plugin first, then run `kubectl get nodes -o json > nodes-dev.json && make verify-nodes "
        "STACK=dev NODES=nodes-dev.json WRITE_EVIDENCE=1`",
        "nothing was written",
    ]


def test_an_app_may_not_take_the_name_of_plex_the_plugin_or_a_tier(tmp_path, capsys):
    for name in ("plex", "intel-gpu-plugin", "apps-wave-1"):
        clash = TWO_APPS.replace("    - name: jellyfin\n", f"    - name: {name}\n")
        code, _ = export(tmp_path / name, two_apps(tmp_path / name, clash))
        assert code == 2
        assert f'gpu-platform:apps[0].name: "{name}": already the name of' in capsys.readouterr().err


def test_post_merge_has_the_exists_step_and_the_uid_1000_device_test_for_every_app(tmp_path):
    code, out = export(tmp_path, two_apps(tmp_path))
    assert code == 0
    text = (out / "clusters/dev/gpu-platform/POST-MERGE.md").read_text()
    assert "`kubectl -n jellyfin exec deploy/jellyfin -- sh -c 'id -u && exec 3<>/dev/dri/renderD128" in text
    assert "`kubectl -n plex exec deploy/plex -- s6-setuidgid plex sh -c 'id -u && exec 3<>/dev/dri/renderD128" in text
    for app in ("jellyfin", "plex"):
        assert f"`flux get kustomizations {app} -n flux-system` shows READY True" in text


def test_in_a_bootstrap_repository_each_app_is_applied_by_its_own_kustomization(tmp_path):
    out = tmp_path / "repo"
    shutil.copytree(repository("flux-bootstrap"), out)
    code, _ = export(tmp_path, two_apps(tmp_path), out)
    assert code == 0
    view = walk(RepoView(out), "./clusters/dev")
    for app in ("plex", "jellyfin"):
        assert view.applied_by[ObjectId("apps", "Deployment", app, app)] == [("flux-system", app)]
    assert ("flux-system", "jellyfin") in view.kustomizations[("flux-system", "apps-wave-1")].depends or \
        ("flux-system", "plex") in view.kustomizations[("flux-system", "apps-wave-1")].depends


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_workload_mounts_a_service_account_token(captures, stack):
    for reg in captures[stack].registrations:
        if reg.type in (DEPLOY, "kubernetes:apps/v1:DaemonSet"):
            assert reg.inputs["spec"]["template"]["spec"]["automountServiceAccountToken"] is False, reg.name


def test_every_app_container_drops_all_capabilities_and_never_gets_net_raw_back(tmp_path):
    code, out = export(tmp_path, two_apps(tmp_path))
    assert code == 0
    for app in ("plex", "jellyfin"):
        deployment = yaml.safe_load((out / f"components/dev/{app}/deployment.{app}.yaml").read_text())
        (c,) = deployment["spec"]["template"]["spec"]["containers"]
        assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert "NET_RAW" not in c["securityContext"]["capabilities"].get("add", [])
        assert all(c[p]["timeoutSeconds"] >= 2 for p in ("startupProbe", "livenessProbe", "readinessProbe"))
    jellyfin = yaml.safe_load((out / "components/dev/jellyfin/deployment.jellyfin.yaml").read_text())
    security = jellyfin["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    assert (security["runAsUser"], security["runAsNonRoot"]) == (1000, True) and "add" not in security["capabilities"]


def test_plex_keeps_its_pulumi_urns_through_an_alias_to_its_old_component_type(monkeypatch, tmp_path):
    from gitops.engine import program as engine

    seen: dict[str, list[str]] = {}
    register = engine.CapturingMonitor.RegisterResource

    def spy(self, request):  # the engine is the one thing tests may stand in for
        if request.type == "gpu-platform:components:GpuApp":
            seen[request.name] = [a.spec.type for a in request.aliases]
        return register(self, request)

    monkeypatch.setattr(engine.CapturingMonitor, "RegisterResource", spy)
    engine.run_program("dev", two_apps(tmp_path))
    assert seen == {"plex": ["gpu-platform:components:Plex"], "jellyfin": []}
