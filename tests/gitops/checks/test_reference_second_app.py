"""gitops/checks/reference.py for a second GPU app the repository delivers: Jellyfin, rendered into
examples/home-network-k3s/repo by the repository's own catalog/render.py and listed in wave 0, declared in the stacks
as `apps[0]` with `deliveredBy: repository`. It gets what Plex gets: the export writes none of its objects, the
evidence gate holds the repository's Jellyfin, and POST-MERGE.md lists it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builders import HOME_DEV, HOME_PROD, git, home_repo, refused_export as refused
from conftest import evidence_for, export, make_project

# The repository's ServiceDefinition, in the shape of its catalog/plex.yaml.
DEFINITION = """\
---
kind: ServiceDefinition
name: jellyfin
wave: 0
image:
  repository: docker.io/linuxserver/jellyfin
  tag: 10.10.3
runAs:
  uid: 1000
  gid: 1000
  uidEnv: PUID
  gidEnv: PGID
  capabilities:
    - CHOWN
    - SETGID
    - SETUID
timezone: ${TIMEZONE}
port:
  name: http
  number: 8096
healthPath: /health
resources:
  requests:
    cpu: 500m
    memory: 1Gi
  limits:
    memory: 4Gi
expose:
  type: ClusterIP
egressClass: internet
authMode: app-native
storage:
  config:
    mountPath: /config
    storageClass: longhorn
    size: 10Gi
  media:
    mountPath: /data
    storageClass: nfs-media
    size: 4Ti
    accessMode: ReadWriteMany
    readOnly: true
hardware:
  gpu: intel-quicksync
"""
# The same app as the stacks declare it: the program's Jellyfin is the reference the repository's is held to.
APP = """\
  gpu-platform:apps:
    - name: jellyfin
      deliveredBy: repository
      image: docker.io/linuxserver/jellyfin:10.10.3
      port: 8096
      env:
        TZ: America/Chicago
        PUID: "1000"
        PGID: "1000"
      volumes:
        - name: config
          mountPath: /config
          size: 10Gi
          storageClass: longhorn
        - name: media
          mountPath: /data
          size: 4Ti
          storageClass: nfs-media
          accessMode: ReadWriteMany
          readOnly: true
      probe:
        path: /health
      capabilities: [CHOWN, SETGID, SETUID]
      egressClass: internet
      authMode: app-native
      hardware:
        gpu: intel-quicksync
"""
RENDERED = "apps/wave-0/jellyfin.yaml"
VERIFY_DEV = ("kubectl get nodes -o json > nodes-dev.json && make verify-nodes STACK=dev NODES=nodes-dev.json "
              "WRITE_EVIDENCE=1")
BOTH = {"prod": evidence_for("prod", {f"k3s-prod-{i}": 2 for i in (1, 2, 3)}),
        "dev": evidence_for("dev", {"k3s-dev-1": 2})}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The user's repository with Jellyfin onboarded as its README says: a definition, its render, a line in wave 0."""
    out = home_repo(tmp_path)
    (out / "catalog/jellyfin.yaml").write_text(DEFINITION)
    render = subprocess.run([sys.executable, "catalog/render.py", "jellyfin"], cwd=out, capture_output=True,
                            text=True)
    assert (render.returncode, render.stdout) == (0, f"{RENDERED}: written\n"), render.stderr
    wave = out / "apps/wave-0/kustomization.yaml"
    wave.write_text(wave.read_text() + "  - jellyfin.yaml\n")
    git(out, "add", "-A")
    git(out, "-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-qm", "onboard jellyfin")
    return out


def project(tmp_path: Path, evidence: dict[str, str] | None = None) -> Path:
    return make_project(tmp_path / "project", {"dev": HOME_DEV + APP, "prod": HOME_PROD + APP}, evidence)


def test_the_export_writes_no_jellyfin_object_and_lists_it_in_post_merge_as_the_repository_s(repo, tmp_path):
    assert export(repo, "dev", "prod", project=project(tmp_path)) == 0

    assert git(repo, "status", "--porcelain", "--", "apps", "catalog") == ""
    assert not any("jellyfin" in p.as_posix() for p in repo.rglob("*") if "platform" in p.parts)
    checklist = (repo / "gpu-platform/prod/POST-MERGE.md").read_text()
    # Jellyfin's readiness is that of the Kustomization Flux's walk found applying it, as Plex's is
    assert "`jellyfin` exists and is Ready: `flux get kustomizations apps-wave-0 -n flux-system`" in checklist
    assert ("- `jellyfin` (delivered by the repository; the export holds it to this gate): **host-path**. jellyfin "
            "keeps the legacy /dev/dri hostPath") in checklist


def test_the_repository_s_jellyfin_requesting_the_gpu_without_evidence_is_refused_naming_its_file(
        repo, tmp_path, capsys):
    rendered = repo / RENDERED
    docs = list(yaml.safe_load_all(rendered.read_text()))
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["gpu.intel.com/i915"] = "1"
    rendered.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    evidence = {"prod": BOTH["prod"]}  # prod has its evidence; dev none

    assert refused(capsys, repo, project(tmp_path, evidence), "prod") == [
        f"{RENDERED}: Deployment jellyfin/jellyfin: spec.template.spec.containers[0].resources.limits."
        "gpu.intel.com/i915: requests gpu.intel.com/i915, but the evidence does not back it for dev (jellyfin keeps "
        "the legacy /dev/dri hostPath (a known no-op: EPERM on open) because there is no evidence that the nodes "
        "advertise gpu.intel.com/i915 (evidence/dev.yaml is missing)); the pod would be Unschedulable and "
        "flux-system/apps-wave-0 would never be Ready, stalling every Kustomization after it; hint: record dev's "
        f"evidence first (`{VERIFY_DEV}`, then commit evidence/dev.yaml); until then keep the /dev/dri hostPath in the "
        "repository's renderer"]


def test_with_evidence_for_every_stack_the_export_prints_jellyfins_renderer_change_once_its_options_apart(
        repo, tmp_path, capsys):
    capsys.readouterr()
    assert export(repo, "dev", "prod", project=project(tmp_path, BOTH)) == 0

    err = capsys.readouterr().err.splitlines()
    told = [line for line in err if line.startswith("WARNING jellyfin: evidence")]
    assert told == ["WARNING jellyfin: evidence for dev, prod allows gpu.intel.com/i915, but the repository's "
                    f"jellyfin ({RENDERED}) does not use it yet; the renderer's pull request makes {RENDERED} hold "
                    "the diff below"]  # once for both stacks of the base
    start = err.index(told[0])
    end = next(i for i in range(start, len(err)) if err[i].startswith("  next: "))
    changed = [line[2:] for line in err[start + 1:end] if line[2:3] in "+-" and line[2:5] not in ("+++", "---")]
    # the switch the renderer's pull request makes, and nothing else: the limit added, the hostPath and its mount gone
    assert [line[0] + line[1:].strip() for line in changed] == [
        "+gpu.intel.com/i915: '1'", "-- mountPath: /dev/dri", "-name: dri", "-- hostPath:", "-path: /dev/dri",
        "-type: Directory", "-name: dri"]
    # the program writes env sorted by name, the renderer TZ first: optional, apart, once
    (optional,) = [line for line in err[start:end] if line.startswith("  optional (")]
    assert "spec.template.spec.containers[0].env[0].name: 'TZ' -> " in optional and "i915" not in optional


def test_a_stack_that_lets_the_export_write_jellyfin_while_the_repository_applies_its_own_is_refused_at_its_key(
        repo, tmp_path, capsys):
    exported = APP.replace("      deliveredBy: repository\n", "")
    proj = make_project(tmp_path / "project", {"dev": HOME_DEV + exported, "prod": HOME_PROD + exported})

    lines = refused(capsys, repo, proj, "dev", "prod")

    assert lines[0] == (
        "Pulumi.dev.yaml: gpu-platform:apps[0].deliveredBy: export (the default), but flux-system/apps-wave-0 (path "
        "./apps/wave-0) already applies the repository's own jellyfin (Deployment jellyfin/jellyfin and 8 more from "
        f"{RENDERED}) that the export writes to platform/jellyfin/ for flux-system/jellyfin; hint: set "
        "apps[0].deliveredBy: repository (the export then writes no Jellyfin and holds the repository's to the GPU "
        f"gate), or take jellyfin out of {RENDERED}")
