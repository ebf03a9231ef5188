"""Every kind of stack-config refusal (model/config/stack.py: the rules across sections, and the sections' own),
word for word: the key to change (as the stack file spells it), the value as the line shows it, what is wrong and
the hint. The shipped dev stack, changed in one place, parsed directly."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from builders import project_keys
from conftest import EXAMPLE
from model.config import DRA_DRIVER_IMAGE, ConfigError, parse_stack_config
from model.images import PLEX_REPOSITORY, RECORDED_DIGESTS

DEV = project_keys(EXAMPLE / "Pulumi.dev.yaml")
SRC = "Pulumi.dev.yaml"
TIERS = "cilium, platform, platform-config, apps-wave-0, apps-wave-1"
APP = {"name": "jelly", "image": "docker.io/jellyfin/jellyfin:10.9.0", "port": 8096, "egressClass": "internet",
       "authMode": "app-native"}
NO_HINT = "; hint: see the key's type in docs/config.md"
DIGEST = "sha256:" + "1" * 64
ADOPTED = {"namespace": "kube-system", "name": "intel-gpu-resource-driver"}  # gpu.dra.kustomization, as home-ops


def refused(change: Callable[[dict[str, Any]], object], source: str = SRC, stack: str | None = None) -> list[str]:
    raw = copy.deepcopy(DEV)
    change(raw)
    with pytest.raises(ConfigError) as info:
        parse_stack_config(raw, source, stack)
    assert str(info.value) == "\n".join(info.value.lines)
    return info.value.lines


def test_the_shipped_dev_stack_parses_as_it_is():
    assert parse_stack_config(copy.deepcopy(DEV), SRC).cluster.nodes == ["k3s-dev-1", "k3s-dev-2"]


# --- rules across sections -----------------------------------------------------------------------------------

def test_an_entry_folder_inside_the_components_folder_is_refused():
    assert refused(lambda r: r.update(gitops={"entryDir": "components/dev/entry"})) == [
        f'{SRC}: gpu-platform:gitops.entryDir: "components/dev/entry": overlaps componentsDir \'components/dev\'; '
        "hint: use two separate folders"]


def test_a_components_folder_inside_the_entry_folder_is_refused():
    assert refused(lambda r: r.update(gitops={"componentsDir": "clusters/dev/gpu-platform/c"})) == [
        f'{SRC}: gpu-platform:gitops.entryDir: "clusters/dev/gpu-platform": overlaps componentsDir '
        "'clusters/dev/gpu-platform/c'; hint: use two separate folders"]


def test_a_components_folder_with_the_per_app_layout_is_refused_and_the_layout_alone_passes():
    assert refused(lambda r: r.update(gitops={"layout": "per-app", "componentsDir": "components/dev"})) == [
        f'{SRC}: gpu-platform:gitops.componentsDir: "components/dev": not used with layout: per-app, where each '
        "component's folder is <entryDir>/<component>/app; hint: remove componentsDir, or use layout: split"]
    raw = copy.deepcopy(DEV)
    raw["gitops"] = {"layout": "per-app"}
    assert parse_stack_config(raw, SRC).gitops.componentsDir is None


@pytest.mark.parametrize("path", ["./clusters/dev/gpu-platform/x", "./components", "./components/dev/plex"])
def test_a_tier_folder_overlapping_a_folder_the_export_owns_is_refused(path):
    owned = "components/dev" if "components" in path else "clusters/dev/gpu-platform"
    assert refused(lambda r: r["flux"]["tiers"][1].update(path=path)) == [
        f'{SRC}: gpu-platform:flux.tiers[1].path: "{path}": overlaps {owned!r}, a folder the export owns, so the '
        "tier would apply exported objects a second time; hint: point the tier at its hand-written folder"]


def test_the_owned_folders_are_the_stack_s_own_when_the_stack_is_read_from_the_file_name():
    def into_prod_components(r):
        r["flux"]["tiers"][1]["path"] = "./components/prod/x"
    raw = copy.deepcopy(DEV)
    into_prod_components(raw)
    parse_stack_config(raw, SRC)  # dev does not own components/prod
    assert refused(into_prod_components, source="Pulumi.prod.yaml") == [
        'Pulumi.prod.yaml: gpu-platform:flux.tiers[1].path: "./components/prod/x": overlaps \'components/prod\', a '
        "folder the export owns, so the tier would apply exported objects a second time; hint: point the tier at its "
        "hand-written folder"]
    parse_stack_config(raw, "Pulumi.prod.yaml", stack="dev")  # an explicit stack wins over the file name


def test_a_repository_tier_without_a_path_is_not_checked_for_overlap():
    def repository_tier(r):
        r["flux"]["tiers"].append({"name": "apps-extra", "declaredBy": "repository"})
    raw = copy.deepcopy(DEV)
    repository_tier(raw)
    assert [t.name for t in parse_stack_config(raw, SRC).flux.tiers][-1] == "apps-extra"


def test_a_cluster_variable_whose_line_is_too_long_names_its_key_and_both_widths():
    name, value = "LONG_NAME", "v" * 100
    assert refused(lambda r: r["flux"]["clusterVars"].update({name: value})) == [
        f'{SRC}: gpu-platform:flux.clusterVars.LONG_NAME: "{"v" * 79}…" (100 characters): `LONG_NAME: <value>` is '
        "111 characters as exported, above the 110 that fit on one 160-character line (.yamllint.yaml) of the "
        "cluster-vars ConfigMap; hint: shorten the name or the value"]


def test_a_cluster_variable_line_that_fits_exactly_is_accepted():
    raw = copy.deepcopy(DEV)
    raw["flux"]["clusterVars"]["LONG_NAME"] = "v" * 99  # `LONG_NAME: ` is 11: 110 in all
    assert parse_stack_config(raw, SRC).flux.clusterVars["LONG_NAME"] == "v" * 99


def test_a_delivery_tier_that_is_not_a_tier_is_refused_for_plex_and_for_an_app():
    def both(r):
        r["plex"]["delivery"] = {"tier": "nope"}
        r["apps"] = [APP, {**APP, "name": "emby", "delivery": {"tier": "later"}}]
    assert refused(both) == [
        f'{SRC}: gpu-platform:plex.delivery.tier: "nope": not a tier; hint: one of {TIERS}',
        f'{SRC}: gpu-platform:apps[1].delivery.tier: "later": not a tier; hint: one of {TIERS}']


def test_a_component_delivered_by_depends_on_needs_no_tier():
    raw = copy.deepcopy(DEV)
    raw["plex"]["delivery"] = {"dependsOn": ["apps-wave-0"]}
    plex = parse_stack_config(raw, SRC).plex
    assert plex is not None and plex.delivery.tier is None


def test_a_plex_digest_recorded_for_another_tag_is_refused(monkeypatch):
    monkeypatch.setitem(RECORDED_DIGESTS, PLEX_REPOSITORY, {"1.41.0.1-abc": DIGEST})
    assert refused(lambda r: r["plex"].update(imageDigest=DIGEST)) == [
        f'{SRC}: gpu-platform:plex.imageDigest: "{DIGEST}": {DIGEST} is recorded for {PLEX_REPOSITORY}:1.41.0.1-abc, '
        "not for tag 1.42.2.10156-f737b826c: the tag was changed without its digest, and Kubernetes would keep pulling "
        "the old image; hint: update the digest with the tag (Renovate does both in one change)"]


def test_an_app_digest_is_checked_against_the_record_of_its_own_repository_and_tag(monkeypatch):
    monkeypatch.setitem(RECORDED_DIGESTS, "docker.io/jellyfin/jellyfin", {"10.9.0": "sha256:" + "2" * 64})
    apps = [{**APP, "imageDigest": DIGEST}, {**APP, "name": "other", "image": "docker.io/other/x:10.9.0",
                                                 "imageDigest": DIGEST}]
    assert refused(lambda r: r.update(apps=apps)) == [
        f'{SRC}: gpu-platform:apps[0].imageDigest: "{DIGEST}": docker.io/jellyfin/jellyfin:10.9.0 is recorded with '
        f"digest sha256:{'2' * 64}, not {DIGEST}; hint: use the recorded digest (model/images.py "
        "RECORDED_DIGESTS), or correct the record if the registry says otherwise"]


def test_an_app_may_not_take_a_name_already_taken():
    apps = [{**APP, "name": "plex"}, {**APP, "name": "intel-gpu-plugin"}, {**APP, "name": "platform"}, APP, APP]
    taken = "; each app gets a namespace and a Flux Kustomization of that name; hint: choose another name"
    assert refused(lambda r: r.update(apps=apps)) == [
        f'{SRC}: gpu-platform:apps[0].name: "plex": already the name of plex{taken}',
        f'{SRC}: gpu-platform:apps[1].name: "intel-gpu-plugin": already the name of the GPU plugin{taken}',
        f'{SRC}: gpu-platform:apps[2].name: "platform": already the name of a tier{taken}',
        f'{SRC}: gpu-platform:apps[4].name: "jelly": already the name of apps[3]{taken}']


def test_a_second_app_repeating_a_taken_name_is_told_the_first_owner():
    apps = [{**APP, "name": "plex"}, {**APP, "name": "plex"}]
    assert refused(lambda r: r.update(apps=apps)) == [
        f'{SRC}: gpu-platform:apps[{i}].name: "plex": already the name of plex; each app gets a namespace and a Flux '
        "Kustomization of that name; hint: choose another name" for i in (0, 1)]


def test_every_problem_across_sections_is_reported_at_once():
    def three(r):
        r["gitops"] = {"entryDir": "components/dev/entry"}
        r["plex"]["delivery"] = {"tier": "nope"}
        r["apps"] = [{**APP, "name": "plex"}]
    assert [line.split(": ")[1] for line in refused(three)] == [
        "gpu-platform:gitops.entryDir", "gpu-platform:plex.delivery.tier", "gpu-platform:apps[0].name"]


# --- refusals from the models ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("change", "line"), [
    (lambda r: r["plex"].pop("advertiseIp"),
     "gpu-platform:plex.advertiseIp: missing: this key is required; hint: add it (every key, its type and default: "
     "docs/config.md)"),
    (lambda r: r["plex"].update(advertizeIp="1.2.3.4"),
     'gpu-platform:plex.advertizeIp: "1.2.3.4": unknown key; hint: did you mean advertiseIp?'),
    (lambda r: r.update(apps=[{**APP, "volumes": [{"name": "a", "mountPath": "/a", "size": "1Gi",
                                                   "storgeClass": "x"}]}]),
     'gpu-platform:apps[0].volumes[0].storgeClass: "x": unknown key; hint: did you mean storageClass?'),
    (lambda r: r["plex"].update(zzzzzz=1),
     "gpu-platform:plex.zzzzzz: 1: unknown key; hint: check its spelling against docs/config.md"),
    (lambda r: r["plex"].update(uid="1000"),
     'gpu-platform:plex.uid: "1000": must be a whole number, not a string, a boolean or a decimal; hint: write the '
     "number unquoted"),
    (lambda r: r["flux"]["tiers"][0].update(wait="yes"),
     'gpu-platform:flux.tiers[0].wait: "yes": must be true or false; hint: write true or false unquoted'),
    (lambda r: r["plex"].update(timezone={"a": 1}),
     "gpu-platform:plex.timezone: {…}: Input should be a valid string" + NO_HINT),
    (lambda r: r.update(gitops={"sequenceIndent": True}),
     "gpu-platform:gitops.sequenceIndent: true: must be the number 0 or 2; hint: write 0 or 2, unquoted"),
    (lambda r: r["flux"]["tiers"][0].update(dependsOn=[5]),
     "gpu-platform:flux.tiers[0].dependsOn[0]: 5: Input should be a valid dictionary or instance of DependsOnRef"
     + NO_HINT),
])
def test_a_model_refusal_names_the_key_the_value_the_problem_and_a_hint(change, line):
    assert refused(change) == [f"{SRC}: {line}"]


# A rule between keys of one model names the key to change below the model, wherever the model sits.
@pytest.mark.parametrize(("change", "line"), [
    (lambda r: r.update(gpu={"route": "dra"}),
     "gpu-platform:gpu.dra.image: missing: route: dra needs the driver's image and the sha256 digest of its tag: "
     f"the export never writes it by tag alone; hint: add image: {DRA_DRIVER_IMAGE} (the release this project is "
     "written for) and imageDigest: <the digest `crane digest <image>` gives>"),
    (lambda r: r.update(gpu={"route": "dra", "dra": {"image": DRA_DRIVER_IMAGE}}),
     "gpu-platform:gpu.dra.imageDigest: missing: route: dra needs the driver's image and the sha256 digest of its "
     f"tag: the export never writes it by tag alone; hint: add imageDigest: <the digest `crane digest "
     f"{DRA_DRIVER_IMAGE}` gives>"),
    (lambda r: r.update(gpu={"route": "dra", "dra": {"deliveredBy": "repository"}}),
     "gpu-platform:gpu.dra.kustomization: missing: deliveredBy: repository adopts the driver a Kustomization of the "
     "repository installs, and the export must know which one, to make the apps' Kustomizations wait for it; hint: "
     "add kustomization: {namespace: <its namespace>, name: <its name>}, e.g. kube-system and "
     "intel-gpu-resource-driver, or set deliveredBy: export"),
    (lambda r: r.update(gpu={"route": "dra", "dra": {"image": DRA_DRIVER_IMAGE, "imageDigest": DIGEST,
                                                     "kustomization": ADOPTED}}),
     "gpu-platform:gpu.dra.kustomization: {…}: only used with deliveredBy: repository; the export delivers its own "
     "driver in its own Kustomization intel-gpu-resource-driver; hint: remove kustomization, or set deliveredBy: "
     "repository if the repository installs the driver"),
    (lambda r: r.update(gpu={"route": "dra", "dra": {"deliveredBy": "repository", "kustomization": ADOPTED,
                                                     "image": DRA_DRIVER_IMAGE, "imageDigest": DIGEST}}),
     'gpu-platform:gpu.dra.image: "ghcr.io/intel/intel-resource-drivers-for-kubernetes/intel-gpu-resource-driver:v…" '
     "(85 characters): not used with deliveredBy: repository: the repository's own release pins the driver's image, "
     "and the export writes no driver; hint: remove image and imageDigest, or set deliveredBy: export"),
    (lambda r: r.update(gpu={"route": "dra", "dra": {"deliveredBy": "repository", "kustomization": ADOPTED,
                                                     "imageDigest": DIGEST}}),
     f'gpu-platform:gpu.dra.imageDigest: "{DIGEST}": not used with deliveredBy: repository: the repository\'s own '
     "release pins the driver's image, and the export writes no driver; hint: remove imageDigest, or set "
     "deliveredBy: export"),
    (lambda r: r.update(kubernetes={"mode": "cluster", "context": "", "fluxManagesCluster": False}),
     "gpu-platform:kubernetes.context: \"\": mode 'cluster' needs the kubeconfig context to apply to; hint: add "
     "context: <a name from kubectl config get-contexts>, or use mode: render"),
    (lambda r: r.update(intelGpuPlugin={"sharedDevNum": 2, "sharedDevNumReason": " "}),
     'gpu-platform:intelGpuPlugin.sharedDevNumReason: " ": sharedDevNum 2 lets several pods share one iGPU with no '
     "partitioning behind it, so the reason is required; hint: add sharedDevNumReason: <why the iGPU is shared>, "
     "or set sharedDevNum: 1"),
])
def test_a_rule_between_keys_names_the_key_to_change_with_its_full_path(change, line):
    assert refused(change) == [f"{SRC}: {line}"]


def test_the_dra_route_adopting_the_repository_s_driver_needs_no_image_and_names_its_kustomization():
    raw = copy.deepcopy(DEV)
    raw["gpu"] = {"route": "dra", "dra": {"deliveredBy": "repository", "kustomization": ADOPTED}}
    dra = parse_stack_config(raw, SRC, "dev").gpu.dra
    assert (dra.adopted, dra.image, dra.imageDigest) == (("kube-system", "intel-gpu-resource-driver"), None, None)
    raw["gpu"]["dra"]["deliveredBy"] = "export"  # the default, with its own driver: no Kustomization of the repository
    del raw["gpu"]["dra"]["kustomization"]
    raw["gpu"]["dra"].update(image=DRA_DRIVER_IMAGE, imageDigest=DIGEST)
    assert parse_stack_config(raw, SRC, "dev").gpu.dra.adopted is None


def test_config_that_is_not_a_mapping_is_refused_at_the_root():
    with pytest.raises(ConfigError) as info:
        parse_stack_config([], SRC)  # type: ignore[arg-type]
    assert info.value.lines == [f"{SRC}: gpu-platform:(root): []: Input should be a valid dictionary or instance of "
                                "StackConfig" + NO_HINT]


def test_a_repository_tier_does_not_end_the_overlap_check_of_the_tiers_after_it():
    def repository_tier_first(r):
        r["flux"]["tiers"].insert(1, {"name": "apps-extra", "declaredBy": "repository"})
        r["flux"]["tiers"][2]["path"] = "./components/dev/x"
    assert refused(repository_tier_first) == [
        f'{SRC}: gpu-platform:flux.tiers[2].path: "./components/dev/x": overlaps \'components/dev\', a folder the '
        "export owns, so the tier would apply exported objects a second time; hint: point the tier at its "
        "hand-written folder"]


def test_the_digest_of_an_image_from_a_registry_with_a_port_is_checked_against_its_own_repository(monkeypatch):
    repository = "registry.lan:5000/media/jellyfin"
    monkeypatch.setitem(RECORDED_DIGESTS, repository, {"10.8.0": DIGEST})
    app = {**APP, "image": f"{repository}:10.9.0", "imageDigest": DIGEST}
    assert refused(lambda r: r.update(apps=[app])) == [
        f'{SRC}: gpu-platform:apps[0].imageDigest: "{DIGEST}": {DIGEST} is recorded for {repository}:10.8.0, not for '
        "tag 10.9.0: the tag was changed without its digest, and Kubernetes would keep pulling the old image; hint: "
        "update the digest with the tag (Renovate does both in one change)"]


def test_every_missing_key_is_one_line_and_the_refusals_after_them_still_come():
    def three(r):
        r["plex"].pop("advertiseIp")
        r["plex"].pop("timezone")
        r["plex"]["uid"] = "1000"
    missing = ": missing: this key is required; hint: add it (every key, its type and default: docs/config.md)"
    assert refused(three) == [
        f"{SRC}: gpu-platform:plex.timezone{missing}",
        f'{SRC}: gpu-platform:plex.uid: "1000": must be a whole number, not a string, a boolean or a decimal; hint: '
        "write the number unquoted",
        f"{SRC}: gpu-platform:plex.advertiseIp{missing}"]


# --- layout: shared-base: one cluster-vars, the records, the base and the overlay apart ---------------------------

def shared_base(raw: dict[str, Any], **gitops: Any) -> None:
    raw["flux"].pop("clusterVars", None)
    raw.update(gitops={"layout": "shared-base", **gitops})


def test_a_shared_base_with_its_folders_apart_and_no_cluster_vars_of_its_own_parses():
    raw = copy.deepcopy(DEV)
    shared_base(raw)
    assert parse_stack_config(raw, SRC, "dev").gitops.layout == "shared-base"


def test_a_shared_base_refuses_cluster_vars_of_the_export_s_own():
    assert refused(lambda r: r.update(gitops={"layout": "shared-base"})) == [
        f'{SRC}: gpu-platform:flux.clusterVars: ["CLUSTER_DOMAIN", "CLUSTER_NAME", "TIMEZONE"]: with layout: '
        "shared-base the repository's own cluster-vars (its base and each overlay's patch) holds every cluster "
        "variable, and the export writes only the keys it owns there; a second cluster-vars would collide with it; "
        "hint: remove flux.clusterVars and keep those values in the overlays"]


@pytest.mark.parametrize(("gitops", "shown", "overlapped"), [
    ({"recordsDir": "clusters/base/rec"}, "clusters/base/rec", "entryDir 'clusters/base'"),
    ({"recordsDir": "clusters"}, "clusters", "entryDir 'clusters/base'"),
    ({"componentsDir": "base/components", "recordsDir": "base/components/rec"}, "base/components/rec",
     "componentsDir 'base/components'"),
    ({"entryDir": "gpu-platform/base"}, "gpu-platform", "entryDir 'gpu-platform/base'"),
])
def test_a_shared_base_keeps_its_records_out_of_every_folder_flux_applies(gitops, shown, overlapped):
    assert refused(lambda r: shared_base(r, **gitops)) == [
        f'{SRC}: gpu-platform:gitops.recordsDir: "{shown}": overlaps {overlapped}, which Flux applies; the records '
        "are never applied; hint: a folder of their own, e.g. gpu-platform"]


@pytest.mark.parametrize("components", ["clusters/base/c", "clusters"])
def test_a_shared_base_keeps_its_entry_and_components_folders_apart(components):
    lines = refused(lambda r: shared_base(r, componentsDir=components))
    assert lines[-1] == (f'{SRC}: gpu-platform:gitops.entryDir: "clusters/base": overlaps componentsDir '
                         f"'{components}'; hint: use two separate folders")


def test_a_shared_base_refuses_a_bootstrap_path_inside_the_base():
    assert refused(lambda r: (shared_base(r), r["flux"].update(bootstrapPath="./clusters/base/dev"))) == [
        f'{SRC}: gpu-platform:flux.bootstrapPath: "./clusters/base/dev": inside the shared base \'clusters/base\'; '
        "each stack's bootstrap path is its overlay of the base; hint: ./clusters/<stack>"]


def test_records_dir_outside_a_shared_base_is_refused():
    assert refused(lambda r: r.update(gitops={"recordsDir": "rec"})) == [
        f'{SRC}: gpu-platform:gitops.recordsDir: "rec": only used with layout: shared-base; the split and per-app '
        "layouts keep their records in the entry folder; hint: remove recordsDir"]


# --- gpu.route: dra: an adminAccess claim only in a namespace the stack names ---------------------------------------

def on_dra(raw: dict[str, Any], named: list[str], allocation: str = "admin-access", gpu: str = "intel-quicksync",
           route: str = "dra", apps: tuple[dict[str, Any], ...] = ()) -> None:
    raw["gpu"] = {"route": route, "dra": {"image": DRA_DRIVER_IMAGE, "imageDigest": DIGEST,
                                          "adminAccessNamespaces": named}}
    raw["plex"]["hardware"] = {"gpu": gpu, "draAllocation": allocation}
    raw["apps"] = list(apps)


def admin_access_line(key: str, name: str) -> str:
    return (f'{SRC}: gpu-platform:{key}.hardware.draAllocation: "admin-access": an adminAccess claim in namespace '
            f'"{name}", which gpu.dra.adminAccessNamespaces does not name, so the export does not label it '
            'resource.kubernetes.io/admin-access: "true" and the API server would refuse the claim; hint: add '
            f'"{name}" to gpu.dra.adminAccessNamespaces, or use draAllocation: exclusive')


def test_an_admin_access_claim_in_a_namespace_the_stack_does_not_name_is_refused_for_plex_and_each_app():
    jelly = {**APP, "hardware": {"gpu": "intel-quicksync", "draAllocation": "admin-access"}}
    assert refused(lambda r: on_dra(r, [])) == [admin_access_line("plex", "plex")]
    assert refused(lambda r: on_dra(r, ["plex"], apps=(jelly,))) == [admin_access_line("apps[0]", "jelly")]


def test_a_namespace_named_twice_for_admin_access_is_refused():
    assert refused(lambda r: on_dra(r, ["plex", "plex"])) == [
        f"{SRC}: gpu-platform:gpu.dra.adminAccessNamespaces: a namespace is named twice; hint: name each once"]


@pytest.mark.parametrize("change", [
    {"named": ["plex"]}, {"named": [], "allocation": "exclusive"}, {"named": [], "gpu": "none"},
    {"named": ["plex", "plex"], "route": "device-plugin"}, {"named": [], "route": "device-plugin"},
], ids=["named", "exclusive", "no-gpu", "twice-off-the-route", "off-the-route"])
def test_admin_access_is_judged_only_on_the_dra_route_for_an_app_that_claims_the_gpu_to_share_it(change):
    raw = copy.deepcopy(DEV)
    on_dra(raw, **change)
    config = parse_stack_config(raw, SRC, "dev")
    assert config.plex is not None
    accepted = {"named": config.gpu.dra.adminAccessNamespaces, "allocation": config.plex.hardware.draAllocation,
                "gpu": config.plex.hardware.gpu, "route": config.gpu.route}
    # on_dra's defaults, with the one change: each value taken as the stack file gives it
    assert accepted == {"allocation": "admin-access", "gpu": "intel-quicksync", "route": "dra", **change}


def test_the_parsed_stack_carries_its_layout_class_decided_once_from_its_name_and_gitops_keys():
    from model.config import StackConfig
    from model.layout import SplitLayout

    cfg = parse_stack_config(copy.deepcopy(DEV), SRC, "dev")
    assert cfg.layout == SplitLayout("dev", "clusters/dev/gpu-platform", "components/dev", "./clusters/dev")
    assert cfg.layout is cfg.layout
    with pytest.raises(ValueError, match="^a StackConfig's layout is decided by parse_stack_config"):
        _ = StackConfig.model_validate(copy.deepcopy(DEV)).layout
