"""model/adopt/app_template.py: a bjw-s app-template HelmRelease's values read as the chart renders them (issue 53):
each enabled controller's workload kind and name, and its pod's GPU access in model/evidence.py's vocabulary. The
reading is held to Helm's own rendering of the chart by tests/e2e/test_app_template_rendered_by_helm.py; these tests
hold each rule and each hostile shape without Helm."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from conftest import FIXTURES
from model.adopt.app_template import (
    AppTemplateReading,
    ContainerGpu,
    PodClaim,
    Workload,
    pod_claims_rendered,
    read_values,
)
from model.evidence import RESOURCE

CHART = FIXTURES / "charts" / "app-template"
GPU_LIMIT = {"resources": {"limits": {RESOURCE: 1}}}


def app(**container: Any) -> dict[str, Any]:
    return {"containers": {"app": {"image": {"repository": "ghcr.io/home-operations/plex", "tag": "1"}, **container}}}


def values(*controllers: str, persistence: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    return {"controllers": {c: app() for c in controllers}, **({"persistence": persistence} if persistence else {}),
            **more}


def only(reading: AppTemplateReading) -> Workload:
    assert not reading.unknown and len(reading.workloads) == 1, reading
    return reading.workloads[0]


def by_controller(reading: AppTemplateReading) -> dict[str, Workload]:
    return {w.controller: w for w in reading.workloads}


DRA = {"controllers": {"plex": {**app(resources={"claims": [{"name": "gpu"}]}),
                                "pod": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "plex"}]}}}}
DRI = {"type": "hostPath", "hostPath": "/dev/dri"}


# --- the access ---------------------------------------------------------------------------------------------------

def test_a_container_limit_of_the_plugin_s_resource_is_the_device_plugin():
    workload = only(read_values({"controllers": {"plex": app(**GPU_LIMIT)}}, "plex", "4.1.1"))
    assert workload == Workload("plex", "Deployment", "plex", "device-plugin",
                                containers=(ContainerGpu("app", "app", False, ("limits",), ()),))


def test_a_request_of_the_resource_counts_as_a_limit_does():
    workload = only(read_values({"controllers": {"plex": app(resources={"requests": {RESOURCE: "1"}})}}, "plex"))
    assert (workload.access, workload.containers[0].requests) == ("device-plugin", ("requests",))


def test_an_init_container_s_limit_is_the_device_plugin_too():
    controller = {**app(), "initContainers": {"probe-gpu": GPU_LIMIT}}
    workload = only(read_values({"controllers": {"plex": controller}}, "plex"))
    assert workload.access == "device-plugin"
    assert workload.containers == (ContainerGpu("probe-gpu", "probe-gpu", True, ("limits",), ()),)


def test_a_pod_claim_by_template_with_the_container_s_claim_is_the_dra_claim_where_the_release_renders_it():
    workload = only(read_values(DRA, "plex", "5.3.0"))
    assert workload.access == "dra-claim"
    assert workload.pod_claims == (PodClaim("gpu", "plex", None),)
    assert workload.containers == (ContainerGpu("app", "app", False, (), ("gpu",)),)


def test_app_template_4_1_1_renders_no_pod_claim_and_the_reading_says_which_value_it_ignored():
    workload = only(read_values(DRA, "plex", "4.1.1"))
    assert (workload.access, workload.pod_claims) == ("none", ())
    assert workload.ignored == ("controllers.plex.pod.resourceClaims (app-template 4.1.1 renders no pod "
                                "resourceClaims)",)
    assert workload.containers == (ContainerGpu("app", "app", False, (), ("gpu",)),)  # rendered as written


@pytest.mark.parametrize("version", [None, "4.4.0", "5.1.0", ">=4.0.0", "5.3.0-rc.1", "latest"])
def test_a_pod_claim_for_a_release_not_known_to_render_it_or_not_cannot_be_told(version):
    workload = only(read_values(DRA, "plex", version))
    assert workload.access == "cannot-tell"
    assert workload.unknown == (f"controllers.plex.pod.resourceClaims: whether app-template "
                                f"{version or '(release unknown)'} renders pod resourceClaims is not known here "
                                "(4.1.1 does not, 5.3.0 does)",)


@pytest.mark.parametrize("version,rendered", [
    ("4.1.1", False), ("v4.1.1", False), ("3.7.3", False), ("4.1.2", None), ("5.2.9", None), ("5.3.0", True),
    ("v6.0.0", True), (None, None), ("", None), ("4.1", None), ("4.1.1+build", None)])
def test_the_releases_known_to_render_pod_claims_are_5_3_0_and_newer_and_those_known_not_to_4_1_1_and_older(
        version, rendered):
    assert pod_claims_rendered(version) is rendered


def test_the_default_pod_options_claims_reach_every_controller():
    text = {**values("plex", "transcoder"), "defaultPodOptions": {"resourceClaims": [{"name": "gpu",
                                                                                       "resourceClaimName": "shared"}]}}
    reading = read_values(text, "plex", "5.3.0")
    assert {w.controller: (w.access, w.pod_claims) for w in reading.workloads} == {
        c: ("dra-claim", (PodClaim("gpu", None, "shared"),)) for c in ("plex", "transcoder")}


def test_a_controller_s_own_pod_claims_replace_the_defaults_and_an_empty_list_does_not():
    text = values("plex", "transcoder", defaultPodOptions={"resourceClaims": [{"name": "default",
                                                                                "resourceClaimTemplateName": "d"}]})
    text["controllers"]["plex"]["pod"] = {"resourceClaims": [{"name": "own", "resourceClaimTemplateName": "o"}]}
    text["controllers"]["transcoder"]["pod"] = {"resourceClaims": []}
    reading = by_controller(read_values(text, "plex", "5.3.0"))
    assert reading["plex"].pod_claims == (PodClaim("own", "o", None),)
    assert reading["transcoder"].pod_claims == (PodClaim("default", "d", None),)


def test_a_dev_dri_host_path_with_global_mounts_is_in_every_controller_s_pod():
    text = values("plex", "transcoder", persistence={"dri": {**DRI, "globalMounts": [{"path": "/dev/dri"}]}})
    assert {w.controller: (w.access, w.host_paths) for w in read_values(text, "plex").workloads} == {
        "plex": ("host-path", ("dri",)), "transcoder": ("host-path", ("dri",))}


def test_advanced_mounts_put_the_host_path_in_the_named_controller_s_pod_only():
    mounts = {"advancedMounts": {"transcoder": {"app": [{"path": "/dev/dri"}]}}}
    reading = by_controller(read_values(values("plex", "transcoder", persistence={"dri": {**DRI, **mounts}}), "plex"))
    assert (reading["plex"].access, reading["transcoder"].access) == ("none", "host-path")


def test_advanced_mounts_naming_a_controller_with_no_container_list_leave_the_pod_without_it():
    mounts = {"advancedMounts": {"transcoder": {}}}
    reading = read_values(values("transcoder", persistence={"dri": {**DRI, **mounts}}), "plex")
    assert only(reading).access == "none"


def test_a_persistence_item_with_no_mounts_at_all_is_in_every_controller_s_pod():
    reading = read_values(values("plex", "transcoder", persistence={"dri": DRI}), "plex")
    assert [w.access for w in reading.workloads] == ["host-path", "host-path"]


@pytest.mark.parametrize("path,access", [("/dev/dri", "host-path"), ("/dev/dri/", "host-path"),
                                         ("/dev/dri/renderD128", "host-path"), ("/dev", "none"),
                                         ("/dev/driver", "none"), ("/srv/dev/dri", "none")])
def test_a_host_path_is_the_gpu_at_dev_dri_or_below_only(path, access):
    assert only(read_values(values("plex", persistence={"dri": {**DRI, "hostPath": path}}), "plex")).access == access


def test_a_custom_volume_of_dev_dri_is_a_host_path_too():
    custom = {"type": "custom", "volumeSpec": {"hostPath": {"path": "/dev/dri/card0", "type": "CharDevice"}}}
    assert only(read_values(values("plex", persistence={"card": custom}), "plex")).host_paths == ("card",)


@pytest.mark.parametrize("item", [
    {**DRI, "enabled": False}, {"type": "emptyDir"}, {"existingClaim": "plex"}, {"type": "nfs", "path": "/dev/dri"},
    {"type": "custom", "volumeSpec": {"emptyDir": {}}}])
def test_a_disabled_item_and_the_other_persistence_types_hold_no_host_device(item):
    assert only(read_values(values("plex", persistence={"x": item}), "plex")).access == "none"


def test_the_device_plugin_comes_before_a_claim_and_a_claim_before_a_host_path_as_in_held_access():
    both = {"controllers": {"plex": {**DRA["controllers"]["plex"], **app(resources={"limits": {RESOURCE: 1}})}},
            "persistence": {"dri": DRI}}
    assert only(read_values(both, "plex", "5.3.0")).access == "device-plugin"
    assert only(read_values({**DRA, "persistence": {"dri": DRI}}, "plex", "5.3.0")).access == "dra-claim"


def test_no_gpu_anywhere_is_none():
    assert only(read_values(values("plex"), "plex")).access == "none"


# --- containers as the chart merges them ------------------------------------------------------------------------

def test_a_disabled_container_requests_nothing():
    controller = {"containers": {"app": {}, "gpu": {**GPU_LIMIT, "enabled": False}}}
    assert only(read_values({"controllers": {"plex": controller}}, "plex")).access == "none"


def test_the_controller_s_default_container_resources_reach_a_container_without_its_own():
    controller = {**app(), "defaultContainerOptions": GPU_LIMIT}
    workload = only(read_values({"controllers": {"plex": controller}}, "plex"))
    assert workload.containers == (ContainerGpu("app", "app", False, ("limits",), ()),)


def test_a_container_s_own_resources_overwrite_the_defaults_unless_the_strategy_is_merge():
    controller = {**app(resources={"limits": {"memory": "1Gi"}}), "defaultContainerOptions": GPU_LIMIT}
    assert only(read_values({"controllers": {"plex": controller}}, "plex")).access == "none"
    merged = {**controller, "defaultContainerOptionsStrategy": "merge"}
    assert only(read_values({"controllers": {"plex": merged}}, "plex")).access == "device-plugin"


def test_init_containers_take_the_defaults_unless_the_controller_says_not_to():
    controller = {**app(resources={"limits": {"memory": "1Gi"}}), "initContainers": {"init": {}},
                  "defaultContainerOptions": GPU_LIMIT}
    assert only(read_values({"controllers": {"plex": controller}}, "plex")).containers == (
        ContainerGpu("init", "init", True, ("limits",), ()),)
    controller["applyDefaultContainerOptionsToInitContainers"] = False
    assert only(read_values({"controllers": {"plex": controller}}, "plex")).access == "none"


def test_a_container_s_name_override_is_its_rendered_name():
    workload = only(read_values({"controllers": {"plex": app(nameOverride="plex-server", **GPU_LIMIT)}}, "plex"))
    assert workload.containers[0].name == "plex-server"


# --- the workload's kind and name ------------------------------------------------------------------------------

@pytest.mark.parametrize("kind_value,kind", [(None, "Deployment"), ("", "Deployment"), ("deployment", "Deployment"),
                                             ("statefulset", "StatefulSet"), ("daemonset", "DaemonSet"),
                                             ("cronjob", "CronJob"), ("job", "Job")])
def test_each_controller_type_is_its_workload_kind(kind_value, kind):
    controller = {**app(), "type": kind_value}
    assert only(read_values({"controllers": {"plex": controller}}, "plex")).kind == kind


def test_one_controller_is_named_for_the_release_and_two_or_more_get_their_key_appended():
    assert only(read_values(values("main"), "plex")).name == "plex"
    assert [w.name for w in read_values(values("main", "worker"), "plex").workloads] == ["plex-main", "plex-worker"]


def test_a_key_equal_to_the_name_or_already_its_suffix_is_not_appended_twice():
    assert [w.name for w in read_values(values("plex", "worker"), "plex").workloads] == ["plex", "plex-worker"]
    assert [w.name for w in read_values(values("app", "worker"), "my-app").workloads] == ["my-app", "my-app-worker"]


def test_a_disabled_controller_renders_nothing_and_is_not_counted_in_the_names():
    text = values("main", "worker")
    text["controllers"]["worker"]["enabled"] = False
    reading = read_values(text, "plex")
    assert ([w.name for w in reading.workloads], reading.disabled) == (["plex"], ("worker",))


def test_the_top_level_name_override_is_never_used_because_app_template_sets_the_global_one():
    assert only(read_values(values("main", nameOverride="jellyfin"), "plex")).name == "plex"
    assert only(read_values(values("main", **{"global": {"nameOverride": "jellyfin"}}), "plex")).name == \
        "plex-jellyfin"
    assert only(read_values(values("main", **{"global": {"nameOverride": "plex"}}), "media-plex")).name == \
        "media-plex"  # the release name contains the name: the release name alone


def test_a_fullname_override_names_the_workload_and_the_global_one_wins():
    assert only(read_values(values("main", fullnameOverride="Plex-Server"), "plex")).name == "plex-server"
    text = values("main", fullnameOverride="a", **{"global": {"fullnameOverride": "b"}})
    assert only(read_values(text, "plex")).name == "b"


def test_force_rename_prefix_suffix_and_always_append_name_the_workload_as_the_chart_does():
    def name(controller: dict[str, Any], **more: Any) -> str | None:
        return only(read_values({"controllers": {"main": {**app(), **controller}}, **more}, "plex")).name
    assert name({"forceRename": "Server"}) == "server"
    assert name({"prefix": "media"}) == "media-plex"
    assert name({"prefix": "plex"}) == "plex"
    assert name({"suffix": "gpu"}) == "plex-gpu"
    assert name({}, **{"global": {"alwaysAppendIdentifierToResourceName": True}}) == "plex-main"


def test_a_name_is_cut_at_63_characters_and_never_ends_with_a_dash():
    assert only(read_values(values("main"), "a" * 62 + "-b")).name == "a" * 62


# --- what cannot be told ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,problem", [
    ("plex", "values: 'plex', not a mapping"),
    ([1, 2], "values: list, not a mapping"),
    ({"controllers": ["plex"]}, "controllers: list, not a mapping"),
])
def test_values_of_another_shape_cannot_be_read_at_all(text, problem):
    assert read_values(text, "plex") == AppTemplateReading("plex", None, unknown=(problem,))


def test_a_controller_that_is_not_a_mapping_is_skipped_as_the_chart_skips_it():
    reading = read_values({"controllers": {"plex": app(), "broken": "{{ .Values.x }}"}}, "plex")
    assert ([w.controller for w in reading.workloads], reading.disabled) == (["plex"], ("broken",))
    assert reading.workloads[0].name == "plex"


def test_an_enabled_that_is_not_a_boolean_cannot_be_told_and_leaves_every_name_untold():
    text = values("plex", "worker")
    text["controllers"]["worker"]["enabled"] = "false"
    reading = by_controller(read_values(text, "plex"))
    assert reading["worker"] == Workload("worker", None, None, "cannot-tell",
                                         unknown=("controllers.worker.enabled: 'false', not true or false",))
    assert (reading["plex"].name, reading["plex"].access) == (None, "none")


@pytest.mark.parametrize("controller,problem", [
    ({**app(), "type": "replicaset"}, "controllers.plex.type: 'replicaset', not one of deployment, statefulset, "
                                      "daemonset, cronjob, job"),
    ({**app(), "type": 3}, "controllers.plex.type: 3, not one of deployment, statefulset, daemonset, cronjob, job"),
    ({"containers": ["app"]}, "controllers.plex.containers: list, not a mapping"),
    ({"containers": {}}, "controllers.plex.containers: no container enabled (the chart refuses to render)"),
    ({"containers": {"app": {"enabled": False}}},
     "controllers.plex.containers: no container enabled (the chart refuses to render)"),
    (app(enabled="yes"), "controllers.plex.containers.app.enabled: 'yes', not true or false"),
    (app(resources="gpu"), "controllers.plex.containers.app.resources: 'gpu', not a mapping"),
    (app(resources={"limits": ["gpu.intel.com/i915"]}), "controllers.plex.containers.app.resources.limits: list, "
                                                        "not a mapping"),
    (app(resources={"claims": "gpu"}), "controllers.plex.containers.app.resources.claims: 'gpu', not a list of "
                                       "claims by name"),
    (app(resources={"claims": [{"name": "{{ .Release.Name }}"}]}),
     "controllers.plex.containers.app.resources.claims: list, not a list of claims by name"),
    ({**app(), "initContainers": {"init": "x"}}, "controllers.plex.initContainers.init: 'x', not a mapping"),
    ({**app(), "defaultContainerOptions": "x"}, "controllers.plex.defaultContainerOptions: 'x', not a mapping"),
    ({**app(), "defaultContainerOptions": GPU_LIMIT, "defaultContainerOptionsStrategy": "append"},
     "controllers.plex.defaultContainerOptionsStrategy: 'append', not one the chart knows"),
])
def test_a_controller_whose_containers_cannot_be_read_cannot_be_told(controller, problem):
    workload = only(read_values({"controllers": {"plex": controller}}, "plex"))
    assert (workload.access, workload.unknown) == ("cannot-tell", (problem,))


@pytest.mark.parametrize("more,problem", [
    ({"defaultPodOptions": ["x"]}, "defaultPodOptions: list, not a mapping"),
    ({"persistence": "dri"}, "persistence: 'dri', not a mapping"),
    ({"persistence": {"dri": ["/dev/dri"]}}, "persistence.dri: list, not a mapping"),
    ({"persistence": {"dri": {**DRI, "enabled": 1}}}, "persistence.dri.enabled: 1, not true or false"),
    ({"persistence": {"dri": {**DRI, "hostPath": "{{ .Values.dev }}"}}},
     "persistence.dri.hostPath: '{{ .Values.dev }}', not a plain path"),
    ({"persistence": {"dri": {"type": "hostPath"}}}, "persistence.dri.hostPath: None, not a plain path"),
    ({"persistence": {"dri": {"type": "device"}}}, "persistence.dri.type: 'device', not a persistence type the "
                                                   "chart knows"),
    ({"persistence": {"dri": {**DRI, "advancedMounts": ["plex"]}}}, "persistence.dri.advancedMounts: list, not a "
                                                                    "mapping"),
    ({"persistence": {"dri": {**DRI, "globalMounts": "/dev/dri"}}}, "persistence.dri.globalMounts: '/dev/dri', not a "
                                                                    "list"),
    ({"persistence": {"dri": {"type": "custom", "volumeSpec": "x"}}}, "persistence.dri.volumeSpec: 'x', not a "
                                                                      "mapping"),
    ({"persistence": {"dri": {"type": "custom", "volumeSpec": {"hostPath": "/dev/dri"}}}},
     "persistence.dri.volumeSpec.hostPath: '/dev/dri', not a mapping"),
])
def test_a_pod_option_or_persistence_item_that_cannot_be_read_leaves_the_access_untold(more, problem):
    workload = only(read_values({"controllers": {"plex": app()}, **more}, "plex", "5.3.0"))
    assert (workload.access, workload.unknown) == ("cannot-tell", (problem,))


@pytest.mark.parametrize("claims", ["gpu", True, [{"name": "gpu", "resourceClaimTemplateName": "{{ .Release.Name }}"}],
                                    [{"resourceClaimTemplateName": "plex"}], [["gpu"]]])
def test_pod_claims_of_another_shape_cannot_be_told(claims):
    text = {"controllers": {"plex": {**app(), "pod": {"resourceClaims": claims}}}}
    assert only(read_values(text, "plex", "5.3.0")).access == "cannot-tell"


def test_what_cannot_be_told_after_the_device_plugin_was_found_does_not_undo_it():
    text = {"controllers": {"plex": app(**GPU_LIMIT)}, "persistence": "broken"}
    workload = only(read_values(text, "plex"))
    assert (workload.access, workload.unknown) == ("device-plugin", ())


def test_a_host_path_found_after_a_container_that_cannot_be_read_cannot_be_told():
    text = {"controllers": {"plex": {"containers": {"app": {}, "b": {"resources": "x"}}}}, "persistence": {"d": DRI}}
    assert only(read_values(text, "plex")).access == "cannot-tell"


@pytest.mark.parametrize("field,value", [("forceRename", "{{ .Release.Name }}-gpu"), ("prefix", 7),
                                         ("suffix", "{{ .Values.x }}")])
def test_a_templated_or_odd_naming_value_leaves_the_name_untold_and_the_access_read(field, value):
    workload = only(read_values({"controllers": {"plex": {**app(**GPU_LIMIT), field: value}}}, "plex"))
    assert (workload.name, workload.access) == (None, "device-plugin")
    assert workload.unknown == (f"controllers.plex.{field}: {value!r}, not a plain string",)


def test_a_templated_name_override_leaves_the_container_s_name_untold():
    workload = only(read_values({"controllers": {"plex": app(nameOverride="{{ .Release.Name }}", **GPU_LIMIT)}}, "p"))
    assert (workload.containers[0].name, workload.access) == (None, "device-plugin")


def test_a_global_of_another_shape_leaves_the_names_untold():
    workload = only(read_values({**values("plex"), "global": "x"}, "plex"))
    assert (workload.name, workload.unknown) == (None, ("global: 'x', not a mapping",))


def test_a_self_referencing_resources_mapping_is_merged_to_a_bound_and_read():
    loop: dict[str, Any] = {"limits": {RESOURCE: 1}}
    loop["self"] = loop
    controller = {**app(resources={"self": {"memory": "1Gi"}}), "defaultContainerOptions": {"resources": loop},
                  "defaultContainerOptionsStrategy": "merge"}
    assert only(read_values({"controllers": {"plex": controller}}, "plex")).access == "device-plugin"


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.sampled_from(["controllers", "plex", "containers", "app", "resources", "limits", RESOURCE,
                                         "claims", "name", "pod", "resourceClaims", "persistence", "type", "hostPath",
                                         "enabled", "globalMounts", "advancedMounts", "defaultPodOptions", "global",
                                         "defaultContainerOptions", "initContainers", "volumeSpec", "forceRename"]),
                        inner, max_size=4), max_leaves=25)


@settings(max_examples=300, deadline=None)
@given(JSON, st.sampled_from([None, "4.1.1", "5.3.0"]))
def test_any_values_are_read_without_a_traceback_into_one_of_the_five_answers(text, version):
    reading = read_values(text, "plex", version)
    assert all(w.access in ("none", "host-path", "device-plugin", "dra-claim", "cannot-tell")
               for w in reading.workloads)
    assert all(w.unknown for w in reading.workloads if w.access == "cannot-tell")


# --- the chart's schema: the fields read are the ones 4.1.1 declares ------------------------------------------------

def schema(name: str) -> dict[str, Any]:
    return json.loads((CHART / "charts" / "common" / "schemas" / f"{name}.json").read_text())


def test_every_field_read_is_one_the_4_1_1_schema_declares_and_pod_claims_are_what_a_newer_release_adds():
    controller = schema("controllers")["instance"]["allOf"][1]["properties"]
    assert {"enabled", "type", "pod", "containers", "initContainers", "defaultContainerOptions",
            "defaultContainerOptionsStrategy", "applyDefaultContainerOptionsToInitContainers", "forceRename",
            "prefix", "suffix"} <= set(controller)
    assert set(controller["type"]["enum"]) == {"deployment", "statefulset", "daemonset", "cronjob", "job"}
    assert {"enabled", "nameOverride", "resources"} <= set(schema("containers")["container"]["properties"])
    persistence = schema("persistence")
    assert {"hostPath", "enabled", "globalMounts", "advancedMounts"} <= set(
        persistence["hostPathItem"]["properties"])
    assert "volumeSpec" in persistence["customItem"]["properties"]
    top = json.loads((CHART / "charts" / "common" / "values.schema.json").read_text())["properties"]
    assert {"nameOverride", "fullnameOverride", "alwaysAppendIdentifierToResourceName"} <= set(
        top["global"]["properties"])
    # newer releases add `resourceClaims` (common 5.3.0: with `resizePolicy` and `schedulingGates`) to the pod options
    pod = schema("pod")["options"]
    assert pod["additionalProperties"] is False
    assert not {"resourceClaims", "resizePolicy", "schedulingGates"} & set(pod["properties"])
