"""model/config/decode.py: stack config is validated before any resource exists, each bad value naming file, key,
value and rule; the project's keys are taken from the engine's config map, secret ones refused."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pulumi
import pytest

from builders import project_keys
from conftest import EXAMPLES, FIXTURES, ROOT, make_project, stack_text
from model.config import ConfigError, app_keys, parse_stack_config, project_config
from model.errors import RefusalError

VALID = sorted((FIXTURES / "config" / "valid").glob("*.yaml"))
INVALID = sorted((FIXTURES / "config" / "invalid").glob("*.yaml"))


def fixture_header(path) -> tuple[str, str]:
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# rule: "), f"{path.name} must open with '# rule: …'"
    assert lines[1].startswith("# key: "), f"{path.name} must name the key on its second line"
    return lines[0][len("# rule: "):], lines[1][len("# key: "):]


SHIPPED = [ROOT / "Pulumi.dev.yaml", ROOT / "Pulumi.prod.yaml", *sorted(EXAMPLES.glob("*/Pulumi.*.yaml"))]


@pytest.mark.parametrize("path", VALID + [p for p in SHIPPED if p.name != "Pulumi.yaml"],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_valid_stack_files_are_accepted(path):
    cfg = parse_stack_config(project_keys(path), path.name)
    assert cfg.cluster.nodes, f"{path.name}: parsed config has no nodes"


# The whole line each invalid fixture is refused with, after `<file>: gpu-platform:`; a compiled pattern where the
# problem is pydantic's wording, which changes between its versions.
PYDANTIC = ".+"
EXPECTED = {
    "app-run-as-group-without-user": "apps[0].runAsUser: missing: runAsGroup 1000 needs the user it is the primary "
                                     "group of; hint: add runAsUser: <the uid the app runs as>, or remove runAsGroup",
    "app-volume-name-twice": 'apps[0].volumes[1].name: "cache": named twice (also apps[0].volumes[0]); '
                             "hint: name each volume once",
    "dra-route-without-image": "gpu.dra.image: missing: route: dra needs the driver's image and the sha256 digest of "
                               "its tag: the export never writes it by tag alone; hint: add image: ghcr.io/intel/"
                               "intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v0.11.0 (the release "
                               "this project is written for) and imageDigest: <the digest `crane digest <image>` "
                               "gives>",
    "dra-repository-driver-without-kustomization": (
        "gpu.dra.kustomization: missing: deliveredBy: repository adopts the driver a Kustomization of the repository "
        "installs, and the export must know which one, to make the apps' Kustomizations wait for it; hint: add "
        "kustomization: {namespace: <its namespace>, name: <its name>}, e.g. kube-system and "
        "intel-gpu-resource-driver, or set deliveredBy: export"),
    "plex-helm-release-delivered-by-export": (
        'plex.helmRelease: "plex": names the repository\'s HelmRelease, but deliveredBy is export: the export would '
        "write a second app beside it; hint: set deliveredBy: repository to adopt the release, or remove helmRelease"),
    "plex-adopted-with-storage": (
        'plex.imageTag: "1.42.2.10156-f737b826c": describes what the export writes, but the repository\'s '
        "HelmRelease delivers this app: the key would change nothing; hint: remove it (the release's values are the "
        "app's)"),
    "plex-workload-without-helm-release": (
        'plex.workload: "plex": names the workload of a HelmRelease the stack does not name; hint: add helmRelease: '
        "{namespace: <ns>, name: <release>} beside it, or remove workload"),
    "dra-kustomization-without-repository": (
        "gpu.dra.kustomization: {…}: only used with deliveredBy: repository; the export delivers its own driver in its "
        "own Kustomization intel-gpu-resource-driver; hint: remove kustomization, or set deliveredBy: repository if "
        "the repository installs the driver"),
    "dra-repository-driver-with-image": (
        'gpu.dra.image: "ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v…" (85 '
        "characters): not used with deliveredBy: repository: the repository's own release pins the driver's image, "
        "and the export writes no driver; hint: remove image, or set deliveredBy: export"),
    "advertise-ip-not-ipv4": 'plex.advertiseIp: "plex.local": must match '
                             r"^((25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])$; "
                             "hint: write a value of that form",
    "cluster-mode-flux-managed": 'kubernetes.mode: "cluster": makes Pulumi apply straight to a cluster that Flux '
                                 "also reconciles, so the two would fight over the same objects; hint: keep mode "
                                 "'render' and let Flux apply the export, or set fluxManagesCluster: false if Flux "
                                 "does not manage that cluster",
    "cluster-mode-without-context": "kubernetes.context: missing: mode 'cluster' needs the kubeconfig context to apply "
                                    "to; hint: add context: <a name from kubectl config get-contexts>, or use mode: "
                                    "render",
    "cluster-var-name-with-dash": 'flux.clusterVars.CLUSTER-NAME: "CLUSTER-NAME": must be a Flux variable name: '
                                  "letters, digits and '_', not starting with a digit (^[_a-zA-Z][_a-zA-Z0-9]*$); "
                                  "hint: write a value of that form",
    "cluster-var-too-long": 'flux.clusterVars.CLUSTER_DOMAIN: "' + "d" * 79 + '…" (99 characters): '
                            "`CLUSTER_DOMAIN: <value>` is 115 characters as exported, above the 110 that fit on one "
                            "160-character line (.yamllint.yaml) of the cluster-vars ConfigMap; "
                            "hint: shorten the name or the value",
    "cni-tier-unknown": 'flux.cniTier: "calico": not among the tiers (cilium, platform, platform-config, apps-wave-0, '
                        "apps-wave-1); hint: declare the CNI's Kustomization as a tier, or set cniTier to one of them",
    "context-in-render-mode": 'kubernetes.context: "k3s-dev": only used with mode \'cluster\'; '
                              "hint: remove it, or set mode: cluster",
    "delivery-tier-and-depends-on": 'plex.delivery.dependsOn: ["cilium"]: set together with tier; a component joins a '
                                    "tier or names its own dependsOn, not both; hint: remove dependsOn to join the "
                                    "tier, or remove tier",
    "delivery-without-tier-or-depends-on": "plex.delivery.tier: missing: neither tier nor dependsOn is set; a "
                                           "component joins a tier or names its own dependsOn; "
                                           "hint: add tier: <a tier> or dependsOn: [...]",
    "device-plugin-without-gpu": 'plex.hardware.intelGpuAccess: "device-plugin": needs gpu \'intel-quicksync\'; '
                                 "hint: set gpu: intel-quicksync beside it, or remove intelGpuAccess",
    "delivery-tier-unknown": 'plex.delivery.tier: "apps-wave-9": not a tier; '
                             "hint: one of cilium, platform, platform-config, apps-wave-0, apps-wave-1",
    "digest-recorded-for-another-tag": "apps[0].imageDigest: \"sha256:{d}\": sha256:{d} is recorded for "
                                       "docker.io/intel/intel-gpu-plugin:0.37.0, not for tag 0.38.0: the tag was "
                                       "changed without its digest, and Kubernetes would keep pulling the old image; "
                                       "hint: update the digest with the tag (Renovate does both in one change)".format(
                                           d="7001200071db10587fc31184eedda4f5cf291efba737adf85a8c80539f7fa5e1"),
    "entry-dir-escapes-repository": 'gitops.entryDir: "../outside": must be a folder relative to the repository root, '
                                    "without '.', '..' or '//'; hint: see the key's type in docs/config.md",
    "gid-quoted-number": 'plex.gid: "1000": must be a whole number, not a string, a boolean or a decimal; '
                         "hint: write the number unquoted",
    "gpu-mode-unknown": re.compile(re.escape('plex.hardware.gpu: "nvidia": ') + PYDANTIC
                                   + re.escape("; hint: see the key's type in docs/config.md")),
    "health-check-kind-lowercase": 'flux.tiers[3].healthChecks[0].kind: "deployment": must match ^[A-Z][A-Za-z0-9]*$; '
                                   "hint: write a value of that form",
    "health-management-arg": "intelGpuPlugin.extraArgs: [\"-health-management\"]: '-health-management' is refused: "
                             "needs the intel-gpu-levelzero sidecar, which opens the GPU itself and so runs "
                             "privileged upstream (overlays/levelzero; issue #2278); this DaemonSet is deliberately "
                             "not privileged and has no sidecar or Level-Zero socket volume; hint: remove it",
    "image-digest-malformed": 'plex.imageDigest: "sha256:1234": must match ^sha256:[0-9a-f]{64}$; '
                              "hint: write a value of that form",
    "image-tag-too-long": 'plex.imageTag: "1.42.2.10156-' + "f" * 66 + '…" (82 characters): 148 characters as '
                          "exported as 'docker.io/plexinc/pms-docker:<tag>@<digest>', above the 110 that fit on one "
                          "160-character line (.yamllint.yaml) after the key the export writes before it; "
                          "hint: shorten it by 38 characters",
    "node-name-duplicate": 'cluster.nodes[1]: "k3s-dev-1": named twice (also cluster.nodes[0]); '
                           "hint: name each node once",
    "node-name-uppercase": 'cluster.nodes[0]: "K3S-DEV-1": must be a DNS-1123 name: lowercase letters, digits, '
                           "'-' and '.' (^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$); "
                           "hint: write a value of that form",
    "plex-missing-storage-class": "plex.storage.configStorageClass: missing: this key is required; "
                                  "hint: add it (every key, its type and default: docs/config.md)",
    "plex-tag-latest": "plex.imageTag: \"latest\": the tag 'latest' is not a pin; hint: use an exact version tag",
    "plugin-digest-in-stack-config": 'intelGpuPlugin.imageDigest: "sha256:7001200071db10587fc31184eedda4f5cf291efba7'
                                     '37adf85a8c80539f7fa5e1": unknown key; '
                                     "hint: check its spelling against docs/config.md",
    "repository-tier-with-path": 'flux.tiers[0].path: "./kubernetes/dev/cilium": tier \'cilium\' is declared by the '
                                 "repository, so its hand-written Kustomization holds path; "
                                 "hint: remove it here, or set declaredBy: export",
    "sequence-indent-false": "gitops.sequenceIndent: false: must be the number 0 or 2; hint: write 0 or 2, unquoted",
    "sequence-indent-three": re.compile(re.escape("gitops.sequenceIndent: 3: ") + PYDANTIC
                                        + re.escape("; hint: see the key's type in docs/config.md")),
    "shared-dev-num-boolean": "intelGpuPlugin.sharedDevNum: true: must be a whole number, not a string, a boolean or "
                              "a decimal; hint: write the number unquoted",
    "shared-dev-num-in-extra-args": "intelGpuPlugin.extraArgs: [\"-shared-dev-num=8\"]: '-shared-dev-num=8' is "
                                    "refused: set through the config key intelGpuPlugin.sharedDevNum, which requires "
                                    "sharedDevNumReason and exports the reason as an annotation on the DaemonSet; "
                                    "hint: set intelGpuPlugin.sharedDevNum and sharedDevNumReason instead",
    "shared-dev-num-reason-too-long": 'intelGpuPlugin.sharedDevNumReason: "' + ("lorem ipsum " * 7)[:79] + '…" '
                                      "(111 characters): 111 characters as exported, above the 110 that fit on one "
                                      "160-character line (.yamllint.yaml) after the key the export writes before it; "
                                      "hint: shorten it by 1 character",
    "shared-dev-num-reason-two-lines": 'intelGpuPlugin.sharedDevNumReason: "two transcoders\\nshare one iGPU\\n": must '
                                       "be one line of text: the export writes it on one line of YAML; "
                                       "hint: remove the line breaks",
    "shared-dev-num-without-reason": "intelGpuPlugin.sharedDevNumReason: missing: sharedDevNum 4 lets several pods "
                                     "share one iGPU with no partitioning behind it, so the reason is required; "
                                     "hint: add sharedDevNumReason: <why the iGPU is shared>, or set sharedDevNum: 1",
    "tier-declared-twice": 'flux.tiers[2].name: "platform": declared twice (also flux.tiers[1]); '
                           "hint: one entry per tier",
    "tier-path-escapes-repository": "flux.tiers[0].path: \"./../../etc\": '.' and '..' are not allowed: a Flux path "
                                    "names a folder inside the repository; "
                                    "hint: write it from the repository root, e.g. ./kubernetes/prod/apps",
    "tier-path-into-exported-folder": "flux.tiers[3].path: \"./components/dev/plex\": overlaps 'components/dev', a "
                                      "folder the export owns, so the tier would apply exported objects a second "
                                      "time; hint: point the tier at its hand-written folder",
    "tier-path-not-relative": 'flux.tiers[0].path: "kubernetes/dev/cilium": must match '
                              r"^\./([A-Za-z0-9._-]+/)*[A-Za-z0-9._-]+$; hint: write a value of that form",
    "tier-path-too-long": 'flux.tiers[0].path: "./kubernetes/dev/' + "c" * 62 + '…" (111 characters): 111 characters '
                          "as exported, above the 110 that fit on one 160-character line (.yamllint.yaml) after the "
                          "key the export writes before it; hint: shorten it by 1 character",
    "tier-without-path": "flux.tiers[2].path: missing: tier 'platform-config' is declared by the export, which writes "
                         "its Kustomization pointing at its hand-written folder; hint: add path: ./<its folder>, e.g. "
                         "./kubernetes/prod/apps/wave-0, or set declaredBy: repository if the repository declares "
                         "that Kustomization",
    "uid-boolean": "plex.uid: true: must be a whole number, not a string, a boolean or a decimal; "
                   "hint: write the number unquoted",
    "uid-root": re.compile(re.escape("plex.uid: 0: ") + PYDANTIC
                           + re.escape("; hint: see the key's type in docs/config.md")),
    "unknown-nested-key": 'plex.storage.configStorageClas: "local-path": unknown key; '
                          "hint: did you mean configStorageClass?",
    "unknown-plugin-flag": "intelGpuPlugin.extraArgs: [\"-resource-manager\"]: '-resource-manager' is not a flag of "
                           "gpu_plugin v0.37.0: fractional resource management was removed in v0.34.0 (release notes: "
                           "'Removal of resource manager functionality'); it also needed GPU Aware Scheduling, NFD and "
                           "a ServiceAccount with a ClusterRole (overlays/fractional_resources), none of which this "
                           "cluster runs; hint: remove it",
    "unknown-top-level-key": "plexx: {…}: unknown key; hint: did you mean plex?",
    "wait-yes": 'flux.tiers[4].wait: "yes": must be true or false; hint: write true or false unquoted',
    "xpumd-endpoint-arg": "intelGpuPlugin.extraArgs: [\"-xpumd-endpoint=/run/xpumd/xpumd.sock\"]: "
                          "'-xpumd-endpoint=/run/xpumd/xpumd.sock' is refused: needs xpumd running on every node and "
                          "its socket folder mounted (upstream mounts host /run/xpumd, overlays/xpumd); this DaemonSet "
                          "mounts neither, so no health data would arrive; hint: remove it",
}


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_stack_file_is_refused_with_a_line_naming_the_key(path):
    rule, key = fixture_header(path)
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(project_keys(path), path.name, stack="dev")  # the fixtures are variants of dev
    lines = caught.value.lines
    expected = EXPECTED[path.stem]
    prefix = f"{path.name}: gpu-platform:"
    assert len(lines) == 1, lines
    if isinstance(expected, re.Pattern):
        assert re.fullmatch(re.escape(prefix) + expected.pattern, lines[0]), lines
    else:
        assert lines == [prefix + expected]
    assert lines[0].startswith(f"{path.name}: {key}:"), f"{path.name} breaks '{rule}' but the line does not name {key}"


def test_every_invalid_fixture_has_an_expected_line():
    assert {p.stem for p in INVALID} == set(EXPECTED)


def test_prod_has_the_three_prod_nodes():
    cfg = parse_stack_config(project_keys(ROOT / "Pulumi.prod.yaml"), "Pulumi.prod.yaml")
    assert cfg.cluster.nodes == ["k3s-prod-1", "k3s-prod-2", "k3s-prod-3"]


def test_dev_has_its_own_nodes():
    cfg = parse_stack_config(project_keys(ROOT / "Pulumi.dev.yaml"), "Pulumi.dev.yaml")
    assert cfg.cluster.nodes and not set(cfg.cluster.nodes) & {"k3s-prod-1", "k3s-prod-2", "k3s-prod-3"}


def test_an_error_shows_the_offending_value_and_what_is_allowed():
    # The problem is pydantic's wording; the value and what is allowed are what this test holds it to.
    line = (re.escape('x.yaml: gpu-platform:plex.hardware.gpu: "nvidia": ') + ".*'none'.*'intel-quicksync'.*"
            + re.escape("; hint: see the key's type in docs/config.md"))
    with pytest.raises(ConfigError) as caught:
        parse_stack_config(project_keys(FIXTURES / "config" / "invalid" / "gpu-mode-unknown.yaml"), "x.yaml")
    assert len(caught.value.lines) == 1 and re.fullmatch(line, caught.value.lines[0]), caught.value.lines


def test_the_program_refuses_bad_config_before_declaring_any_resource(run_stack_text):
    bad = stack_text("dev").replace("gpu: intel-quicksync", "gpu: nvidia")
    # The core's ConfigError, raised to the CLI as a RunError: Pulumi prints it without a traceback.
    line = re.escape('Pulumi.variant.yaml: gpu-platform:plex.hardware.gpu: "nvidia": ') + ".+" + re.escape(
        "; hint: see the key's type in docs/config.md")  # the problem is pydantic's wording
    with pytest.raises(pulumi.RunError) as caught:
        run_stack_text(bad)
    assert isinstance(caught.value, RefusalError)
    assert len(caught.value.lines) == 1 and re.fullmatch(line, caught.value.lines[0]), caught.value.lines


def test_secret_config_is_refused_without_showing_its_value(run_stack_text):
    text = stack_text("dev") + "  gpu-platform:claimToken:\n    secure: AAABAKZnotarealciphertext\n"
    with pytest.raises(RefusalError) as caught:
        run_stack_text(text)
    assert caught.value.lines == [
        "Pulumi.variant.yaml: gpu-platform:claimToken: (secret): secret config is refused; "
        "hint: reference a Secret by name"]
    assert "AAAB" not in str(caught.value)


def test_export_of_a_bad_stack_exits_2_with_one_line_per_error_no_traceback_and_writes_nothing(tmp_path):
    bad = stack_text("dev").replace("imageTag: 1.42.2.10156-f737b826c", "imageTag: latest").replace(
        "CLUSTER_NAME: dev", "CLUSTER-NAME: dev")
    project = make_project(tmp_path / "project", {"bad": bad})
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, "-m", "gitops.export", "--stack", "bad", "--out", str(out), "--project-dir", str(project)],
        cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        'error: Pulumi.bad.yaml: gpu-platform:flux.clusterVars.CLUSTER-NAME: "CLUSTER-NAME": must be a Flux variable '
        "name: letters, digits and '_', not starting with a digit (^[_a-zA-Z][_a-zA-Z0-9]*$); "
        "hint: write a value of that form",
        "error: Pulumi.bad.yaml: gpu-platform:plex.imageTag: \"latest\": the tag 'latest' is not a pin; "
        "hint: use an exact version tag",
        "nothing was written",
    ]
    assert not out.exists()


# --- config as the engine hands it over ----------------------------------------------------------------------

def test_the_project_s_keys_are_taken_without_their_prefix_and_decoded():
    config = {"gpu-platform:a": '{"x": 1}', "gpu-platform:b": "plain", "gpu-platform:n": "5",
              "gpu-platform:l": [1], "gpu-platform:s": '"quoted"', "other:c": "1", "gpu-platformx:d": "2"}
    assert project_config(config, set(), "Pulumi.dev.yaml") == {
        "a": {"x": 1}, "b": "plain", "n": 5, "l": [1], "s": "quoted"}


def test_every_secret_key_of_the_project_is_refused_without_its_value_and_other_secrets_are_ignored():
    config = {"gpu-platform:z": "s1", "gpu-platform:a": "s2", "gpu-platform:ok": "1", "aws:k": "s3"}
    with pytest.raises(ConfigError) as info:
        project_config(config, ["gpu-platform:z", "gpu-platform:a", "aws:k"], "Pulumi.x.yaml")
    hint = "(secret): secret config is refused; hint: reference a Secret by name"
    assert info.value.lines == [f"Pulumi.x.yaml: gpu-platform:a: {hint}", f"Pulumi.x.yaml: gpu-platform:z: {hint}"]
    assert str(info.value) == "\n".join(info.value.lines)


def test_a_secret_key_in_a_stack_file_is_refused_naming_the_stack_file(run_stack_text):
    text = stack_text("dev") + "  gpu-platform:claimToken:\n    secure: AAABAKZnotarealciphertext\n"
    with pytest.raises(RefusalError) as info:
        run_stack_text(text)
    assert info.value.lines == ["Pulumi.variant.yaml: gpu-platform:claimToken: (secret): secret config is refused; "
                                "hint: reference a Secret by name"]


def test_each_app_s_key_in_the_stack_file_is_read_back_from_the_engine_s_config_map():
    jellyfin = {"name": "jellyfin", "image": "docker.io/jellyfin/jellyfin:10.10.3", "port": 8096,
                "egressClass": "internet", "authMode": "app-native"}
    config = {"gpu-platform:apps": json.dumps([jellyfin, {**jellyfin, "name": "tdarr"}]), "gpu-platform:plex": "{}"}
    assert app_keys(config) == {"jellyfin": "apps[0]", "tdarr": "apps[1]"}
    assert app_keys({"gpu-platform:plex": "{}"}) == {}  # Plex's key is its name; no apps, no keys
