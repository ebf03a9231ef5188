"""An app adopted from the repository's Flux HelmRelease (gitops/checks/adopted.py): the export writes none of its
objects, reads the pod from the release's values as bjw-s app-template renders them, and holds it to the evidence gate
exactly as an app it renders; every refusal is one line naming the release's file (or the stack key), nothing written.
A small repository in the home-operations shape is built per test: a per-app ks.yaml, the release by chartRef."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import evidence_for, export, files_of, make_project
from model.evidence import next_step

NODES = ("k8s-0", "k8s-1", "k8s-2")
RELEASE_FILE = "kubernetes/apps/default/plex/app/helmrelease.yaml"
CLAIM_VALUES = """\
    controllers:
      plex:
        containers:
          app:
            image: {repository: ghcr.io/home-operations/plex, tag: 1.43.0}
            resources:
%s
"""
I915 = CLAIM_VALUES % "              limits: {gpu.intel.com/i915: 1}"
NO_GPU = CLAIM_VALUES % "              requests: {cpu: 100m}"
HOST_PATH = NO_GPU + """\
    persistence:
      dri:
        type: hostPath
        hostPath: /dev/dri
"""


def ks(namespace: str, name: str, path: str) -> str:
    return (f"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: {name}\n"
            f"spec:\n  interval: 1h\n  path: {path}\n  prune: true\n  sourceRef:\n    kind: GitRepository\n"
            f"    name: flux-system\n    namespace: flux-system\n  targetNamespace: {namespace}\n")


def repository(root: Path, values: str, chart_url: str = "oci://ghcr.io/bjw-s-labs/helm/app-template",
               tag: str = "4.1.1", app: str = "plex", namespace: str = "default") -> Path:
    files = {
        "kubernetes/flux/cluster/ks.yaml": (
            "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: cluster-apps\n"
            "  namespace: flux-system\nspec:\n  interval: 1h\n  path: ./kubernetes/apps\n  prune: true\n"
            "  sourceRef:\n    kind: GitRepository\n    name: flux-system\n    namespace: flux-system\n"),
        "kubernetes/apps/kube-system/kustomization.yaml": (
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: kube-system\n"
            "resources:\n  - ./cilium/ks.yaml\n"),
        "kubernetes/apps/kube-system/cilium/ks.yaml": ks("kube-system", "cilium",
                                                         "./kubernetes/apps/kube-system/cilium/app"),
        "kubernetes/apps/kube-system/cilium/app/kustomization.yaml": (
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ./configmap.yaml\n"),
        "kubernetes/apps/kube-system/cilium/app/configmap.yaml": (
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cilium-settings\ndata:\n  mode: native\n"),
        f"kubernetes/apps/{namespace}/kustomization.yaml": (
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            f"namespace: {namespace}\nresources:\n  - ./{app}/ks.yaml\n"),
        f"kubernetes/apps/{namespace}/{app}/ks.yaml": ks(namespace, app, f"./kubernetes/apps/{namespace}/{app}/app"),
        f"kubernetes/apps/{namespace}/{app}/app/kustomization.yaml": (
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n"
            "  - ./helmrelease.yaml\n  - ./ocirepository.yaml\n"),
        f"kubernetes/apps/{namespace}/{app}/app/ocirepository.yaml": (
            f"apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: {app}\nspec:\n"
            f"  interval: 15m\n  ref:\n    tag: {tag}\n  url: {chart_url}\n"),
        f"kubernetes/apps/{namespace}/{app}/app/helmrelease.yaml": (
            f"apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: {app}\nspec:\n"
            f"  chartRef:\n    kind: OCIRepository\n    name: {app}\n  interval: 1h\n  values:\n" + values),
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def stack(plex: str = "") -> str:
    return f"""\
config:
  gpu-platform:cluster:
    nodes: [{", ".join(NODES)}]
  gpu-platform:kubernetes:
    mode: render
    renderDirectory: build/pulumi-render
  gpu-platform:flux:
    bootstrapPath: ./kubernetes/flux/cluster
    tiers:
      - name: cilium
        declaredBy: repository
        namespace: kube-system
  gpu-platform:gitops:
    entryDir: kubernetes/apps/gpu-platform
    componentsDir: kubernetes/gpu-platform
    sequenceIndent: 2
  gpu-platform:plex:
    deliveredBy: repository
    helmRelease:
      namespace: default
      name: plex
{plex}    hardware:
      gpu: intel-quicksync
"""


def run(tmp_path: Path, capsys, values: str, plex: str = "", evidence: bool = True,
        **chart: str) -> tuple[int, str, Path]:
    out = repository(tmp_path / "repo", values, **chart)
    project = make_project(tmp_path / "project", {"home": stack(plex)},
                           {"home": evidence_for("home", dict.fromkeys(NODES, 1))} if evidence else None)
    before = files_of(out)
    capsys.readouterr()
    code = export(out, "home", project=project)
    err = capsys.readouterr().err
    if code != 0:
        assert files_of(out) == before  # a refusal writes nothing
    return code, err, out


def refusal(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, err
    return lines[0].removeprefix("error: ")


def test_an_adopted_release_requesting_the_plugins_resource_on_evidence_is_exported_without_a_second_plex(
        tmp_path, capsys):
    code, err, out = run(tmp_path, capsys, I915)
    assert code == 0, err
    written = [rel for rel in files_of(out) if rel.startswith("kubernetes/apps/gpu-platform/")
               or rel.startswith("kubernetes/gpu-platform/")]
    assert not [rel for rel in written if "/plex/" in rel]  # the repository's Plex is the only one
    delivery = (out / "kubernetes/apps/gpu-platform/DELIVERY.md").read_text()
    assert (f"`plex` is the repository's: HelmRelease default/plex ({RELEASE_FILE}), Deployment default/plex, which "
            "the stack adopts (`plex.helmRelease`)") in delivery
    checklist = (out / "kubernetes/apps/gpu-platform/POST-MERGE.md").read_text()
    assert "`kubectl -n default rollout status deployment/plex --timeout=10m`" in checklist


@pytest.mark.parametrize(("values", "expected"), [
    (I915, f"{RELEASE_FILE}: HelmRelease default/plex: Deployment default/plex requests gpu.intel.com/i915, but the "
           "evidence does not back it for home (plex keeps the legacy /dev/dri hostPath (a known no-op: EPERM on "
           "open) because there is no evidence that the nodes advertise gpu.intel.com/i915 (evidence/home.yaml is "
           "missing)); the pod would be Unschedulable and default/plex would never be Ready, stalling every "
           f"Kustomization after it; hint: record home's evidence first (`{next_step('home')}`, then commit "
           "evidence/home.yaml); until then take the request out of the release's values"),
    (NO_GPU, f"{RELEASE_FILE}: HelmRelease default/plex: Deployment default/plex reaches no GPU (no "
             "gpu.intel.com/i915, no claim, no /dev/dri hostPath in its values), but plex.hardware.gpu is "
             "intel-quicksync and the gate allows host-path for home: plex would transcode on the CPU; hint: give the "
             "values the /dev/dri hostPath persistence, or set plex.hardware.gpu: none"),
], ids=["requesting-the-plugins-resource", "reaching-no-gpu-at-all"])
def test_an_adopted_release_the_gate_does_not_allow_without_evidence_is_refused_naming_its_file(
        tmp_path, capsys, values, expected):
    code, err, _ = run(tmp_path, capsys, values, evidence=False)
    assert code == 2
    assert refusal(err) == expected


def test_an_adopted_release_on_the_hostpath_is_told_the_values_to_change_once_evidence_allows_the_plugin(
        tmp_path, capsys):
    code, err, out = run(tmp_path, capsys, HOST_PATH)
    assert code == 0, err
    told = ("plex: evidence for home allows device-plugin, but the repository's plex "
            f"({RELEASE_FILE}) keeps its /dev/dri hostPath; the release's values need "
            "controllers.plex.containers.app.resources.limits: {gpu.intel.com/i915: 1}, its hostPath persistence "
            "removed, in the same pull request")
    assert told in err
    assert told in (out / "kubernetes/apps/gpu-platform/DELIVERY.md").read_text()
    # what the cluster runs after the merge is what the values hold, until the renderer's change lands
    checklist = (out / "kubernetes/apps/gpu-platform/POST-MERGE.md").read_text()
    assert ("- `plex` (delivered by the repository; the export holds it to this gate): **host-path** after this "
            "merge; the gate allows **device-plugin**") in checklist


def test_a_release_of_another_chart_is_refused_until_the_stack_states_what_its_pod_holds(tmp_path, capsys):
    code, err, _ = run(tmp_path, capsys, HOST_PATH, chart_url="oci://ghcr.io/example/charts/plex", tag="1.0.0")
    assert code == 2
    assert refusal(err) == (
        f"{RELEASE_FILE}: HelmRelease default/plex: the export cannot tell how its pod reaches the GPU (it installs "
        "the chart plex, by chartRef OCIRepository default/plex, not bjw-s app-template, whose values are the only "
        "ones the export reads); hint: state it in plex.helmRelease.gpuAccess: device-plugin, dra-claim, host-path "
        "or none (the post-merge checks test it on the cluster)")


def test_a_release_of_another_chart_is_judged_on_what_the_stack_states(tmp_path, capsys):
    code, err, _ = run(tmp_path / "a", capsys, HOST_PATH, plex="      gpuAccess: device-plugin\n",
                       chart_url="oci://ghcr.io/example/charts/plex", tag="1.0.0")
    assert code == 0, err
    assert ("plex: how HelmRelease default/plex reaches the GPU is stated by plex.helmRelease.gpuAccess "
            "(device-plugin): its values cannot say (it installs the chart plex") in err
    code, err, _ = run(tmp_path / "b", capsys, HOST_PATH, plex="      gpuAccess: device-plugin\n", evidence=False,
                       chart_url="oci://ghcr.io/example/charts/plex", tag="1.0.0")
    assert code == 2
    assert "requests gpu.intel.com/i915, but the evidence does not back it for home" in refusal(err)


def test_a_stated_access_the_values_contradict_is_refused(tmp_path, capsys):
    code, err, _ = run(tmp_path, capsys, HOST_PATH, plex="      gpuAccess: dra-claim\n")
    assert code == 2
    assert refusal(err) == (
        f"{RELEASE_FILE}: HelmRelease default/plex: its values give host-path, but plex.helmRelease.gpuAccess states "
        "dra-claim; hint: remove plex.helmRelease.gpuAccess (the values say it), or change the values")


def test_a_release_flux_does_not_apply_is_refused_at_the_stack_key_with_the_closest_names(tmp_path, capsys):
    out = repository(tmp_path / "repo", HOST_PATH)
    project = make_project(tmp_path / "project", {"home": stack().replace("name: plex\n", "name: plexx\n", 1)})
    capsys.readouterr()
    assert export(out, "home", project=project) == 2
    assert refusal(capsys.readouterr().err) == (
        "Pulumi.home.yaml: gpu-platform:plex.helmRelease: default/plexx: Flux's walk from ./kubernetes/flux/cluster "
        "applies no HelmRelease default/plexx, so the evidence gate cannot see the repository's app; hint: did you "
        "mean default/plex?")


def test_a_workload_the_release_does_not_render_is_refused_with_the_ones_it_renders(tmp_path, capsys):
    code, err, _ = run(tmp_path, capsys, HOST_PATH, plex="    workload:\n      kind: StatefulSet\n      name: plex\n")
    assert code == 2
    assert refusal(err) == (
        f"{RELEASE_FILE}: HelmRelease default/plex: renders no StatefulSet plex (it renders Deployment plex); hint: "
        "name the one whose pod holds the iGPU in plex.workload: {kind: <kind>, name: <name>}")


def test_a_stack_without_plex_adopts_its_only_gpu_app_in_a_namespace_of_its_own(tmp_path, capsys):
    """Jellyfin in `media`, the repository's app-template release, and no Plex at all: nothing of Plex is declared,
    written or judged, and Jellyfin is held to the gate as Plex would be."""
    values = I915.replace("controllers:\n      plex:", "controllers:\n      jellyfin:")
    out = repository(tmp_path / "repo", values, app="jellyfin", namespace="media")
    text = stack().replace("""  gpu-platform:plex:
    deliveredBy: repository
    helmRelease:
      namespace: default
      name: plex
    hardware:
      gpu: intel-quicksync
""", """  gpu-platform:apps:
    - name: jellyfin
      deliveredBy: repository
      helmRelease:
        namespace: media
        name: jellyfin
      hardware:
        gpu: intel-quicksync
""")
    assert "plex" not in text
    evidence = {"home": evidence_for("home", dict.fromkeys(NODES, 1))}
    project = make_project(tmp_path / "project", {"home": text}, evidence)
    capsys.readouterr()
    assert export(out, "home", project=project) == 0, capsys.readouterr().err
    records = out / "kubernetes/apps/gpu-platform"
    assert "`jellyfin` is the repository's: HelmRelease media/jellyfin" in (records / "DELIVERY.md").read_text()
    checklist = (records / "POST-MERGE.md").read_text()
    assert "`kubectl -n media rollout status deployment/jellyfin --timeout=10m`" in checklist
    assert "plex" not in checklist
    index = json.loads((records / "export-index.json").read_text())
    assert "plexGpuAccess" not in json.dumps(index)
    (out / "kubernetes/apps/media/jellyfin/app/helmrelease.yaml").write_text(
        (out / "kubernetes/apps/media/jellyfin/app/helmrelease.yaml").read_text().replace(
            "limits: {gpu.intel.com/i915: 1}", "requests: {cpu: 100m}"))
    before = files_of(out)
    capsys.readouterr()
    assert export(out, "home", project=project) == 2
    assert refusal(capsys.readouterr().err).startswith(
        "kubernetes/apps/media/jellyfin/app/helmrelease.yaml: HelmRelease media/jellyfin: Deployment media/jellyfin "
        "reaches no GPU")
    assert files_of(out) == before
