"""gitops/plan/render.py, called directly: the text plan shaped like `pulumi preview --diff` (the resource tree,
folded where nothing changes, with its diffs, outputs, diagnostics and summary; coloured when asked), the JSON plan,
and how the two sides of a changed value are shown."""

from __future__ import annotations

import json

from builders import APP_URN as APP, QUIET_URN as QUIET, STACK_URN as ROOT
from gitops.plan.diff import Change, shown
from gitops.plan.plan import Plan, Step
from gitops.plan.render import render_json, render_text, shown_pair

# --- how a changed value is shown ----------------------------------------------------------------------------------

def test_two_long_strings_differing_late_are_shown_from_just_before_the_difference():
    assert shown_pair("a" * 300 + "X", "a" * 300 + "Y") == ('"…' + "a" * 40 + 'X"', '"…' + "a" * 40 + 'Y"')
    assert shown_pair("ab", "ac") == ('"ab"', '"ac"')
    assert shown_pair(["a" * 300], ["a" * 300]) == (shown(["a" * 300]),) * 2


def test_two_long_strings_that_differ_late_are_shown_from_the_difference():
    old, new = "x" * 300 + "old tail", "x" * 300 + "new tail"
    before, after = shown_pair(old, new)
    assert before != after and "old tail" in before and "new tail" in after


# --- rendering -----------------------------------------------------------------------------------------------------

def sample_plan(index: str | None = "clusters/dev/gpu-platform/.gitops-export.json") -> Plan:
    plan = Plan(stack="dev", project="gpu-platform", out="/repo", index=index)
    plan.components = [Step("same", APP, "gpu-platform:components:GpuApp", "plex", ROOT),
                       Step("same", QUIET, "gpu-platform:components:Quiet", "quiet", ROOT)]
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "plex", "namespace": "plex"}
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "plex-config", "namespace": "plex"}
    plan.steps = [
        Step("same", APP + "$ns", "kubernetes:core/v1:Namespace", "plex-namespace", APP, "c/plex/ns.yaml",
             {"apiVersion": "v1", "kind": "Namespace", "name": "plex"}),
        Step("same", QUIET + "$cm", "kubernetes:core/v1:ConfigMap", "quiet-cm", QUIET, "c/quiet/cm.yaml",
             {"apiVersion": "v1", "kind": "ConfigMap", "name": "q"}),
        Step("update", APP + "$dep", "kubernetes:apps/v1:Deployment", "plex-deployment", APP, "c/plex/deployment.yaml",
             dep, [Change("spec.template.spec.containers[0].image", "update", "plex:1", "plex:2"),
                   Change("metadata.labels.x", "add", new="y"), Change("metadata.labels.z", "delete", old="w")]),
        Step("replace", APP + "$pvc", "kubernetes:core/v1:PersistentVolumeClaim", "plex-config", APP, "c/plex/pvc.yaml",
             claim, [Change("spec.storageClassName", "update", "a", "b", replace="immutable")], flux=["one", "two"]),
        Step("create", ROOT + "$new", "kubernetes:v1:ConfigMap", "new", ROOT, "x.yaml",
             {"apiVersion": "v1", "kind": "ConfigMap", "name": "new", "namespace": "n"}),
        Step("delete", ROOT + "$old", "kubernetes:v1:ConfigMap", "n/old", ROOT, "y.yaml",
             {"apiVersion": "v1", "kind": "ConfigMap", "name": "old", "namespace": "n"}),
    ]
    plan.outputs = [Change("plexGpuAccess", "update", "host-path", "device-plugin")]
    plan.outputs_unchanged = 3
    plan.diagnostics = [("warning", "careful"), ("error", "bad"), ("warning", "again")]
    return plan


EXPECTED_TEXT = """\
Previewing update (dev): the export compared with the tree the last export left in /repo \
(clusters/dev/gpu-platform/.gitops-export.json)

     Type                                            Name              Plan
     pulumi:pulumi:Stack                             gpu-platform-dev  1 error, 2 warnings
     ├─ gpu-platform:components:GpuApp               plex
 ~   │  ├─ kubernetes:apps/v1:Deployment             plex-deployment   update
     │  │      ~ spec.template.spec.containers[0].image: "plex:1" => "plex:2"
     │  │      + metadata.labels.x: "y"
     │  │      - metadata.labels.z: "w"
 +-  │  ├─ kubernetes:core/v1:PersistentVolumeClaim  plex-config       replace
     │  │      +- spec.storageClassName: "a" => "b"
     │  │      !! one
     │  │      !! two
     │  └─ 1 unchanged
     ├─ gpu-platform:components:Quiet                quiet             1 unchanged
 -   ├─ kubernetes:v1:ConfigMap                      n/old             delete
 +   └─ kubernetes:v1:ConfigMap                      new               create

Outputs:
  ~ plexGpuAccess: "host-path" => "device-plugin"
    3 unchanged

Diagnostics:
  pulumi:pulumi:Stack (gpu-platform-dev):
    warning: careful
    error: bad
    warning: again

!! 1 to replace (PersistentVolumeClaim plex/plex-config): Kubernetes refuses these changes in place; see what Flux \
will do and the safe path above.

Resources: 1 to create, 1 to update, 1 to replace, 1 to delete, 2 unchanged
"""


def test_the_text_plan_is_the_resource_tree_with_diffs_outputs_diagnostics_and_the_summary():
    assert render_text(sample_plan()) == EXPECTED_TEXT


def test_colour_marks_each_operation_and_diff_line_and_nothing_else():
    text = render_text(sample_plan(), colour=True)
    assert " \033[33m~ \033[0m  │  ├─ kubernetes:apps/v1:Deployment             plex-deployment   " \
           "\033[33mupdate\033[0m\n" in text
    assert "     │  │      \033[1;35m+- spec.storageClassName: \"a\" => \"b\"\033[0m\n" in text
    assert "     │  │      \033[1;31m!! one\033[0m\n" in text
    assert "     │  │      \033[32m+ metadata.labels.x: \"y\"\033[0m\n" in text
    assert "     │  │      \033[31m- metadata.labels.z: \"w\"\033[0m\n" in text
    assert " \033[31m- \033[0m  ├─ kubernetes:v1:ConfigMap" in text and " \033[32m+ \033[0m  └─ " in text
    assert "    \033[33mwarning:\033[0m careful\n    \033[31merror:\033[0m bad\n" in text
    assert "\n\033[1;31m!! 1 to replace (PersistentVolumeClaim plex/plex-config)" in text
    assert "  \033[33m~ plexGpuAccess: \"host-path\" => \"device-plugin\"\033[0m\n" in text
    assert "\033[" not in text.split("\n")[3]  # an unchanged row is never painted
    assert text.replace("\033[33m", "").replace("\033[32m", "").replace("\033[31m", "").replace(
        "\033[1;35m", "").replace("\033[1;31m", "").replace("\033[0m", "") == EXPECTED_TEXT


def test_a_plan_with_nothing_to_do_folds_everything_and_says_so():
    plan = Plan(stack="dev", project="p", out="/new", index=None)
    plan.components = [Step("same", APP, "gpu-platform:components:GpuApp", "plex", ROOT.replace("gpu-platform", "p"))]
    plan.steps = [Step("same", f"{APP}$a", "kubernetes:v1:ConfigMap", "a", APP, "a.yaml", {"kind": "ConfigMap"}),
                  Step("same", f"{APP}$b", "kubernetes:v1:ConfigMap", "b", APP, "b.yaml", {"kind": "ConfigMap"})]
    plan.diagnostics = [("warning", "only one")]
    text = render_text(plan)
    assert text.startswith("Previewing update (dev): the export compared with /new, which holds no export of dev "
                           "(every object is new)\n")
    assert "     └─ gpu-platform:components:GpuApp  plex   2 unchanged\n" in text
    assert "     pulumi:pulumi:Stack                p-dev  1 warning\n" in text
    assert "Outputs:\n\nDiagnostics:" in text
    plan.index, plan.outputs_recorded = "i.json", False
    not_compared = "Outputs:\n    (not compared: i.json records no outputs; the next export records them)\n"
    assert not_compared in render_text(plan)
    assert "to replace" not in text.split("Resources:")[0]
    assert text.endswith("\nResources: 0 to create, 0 to update, 0 to replace, 0 to delete, 2 unchanged\n")


def test_the_json_plan_carries_steps_in_file_order_with_their_diffs_and_flux_lines():
    doc = json.loads(render_json(sample_plan()))
    assert [s["file"] for s in doc["steps"]] == ["c/plex/deployment.yaml", "c/plex/ns.yaml", "c/plex/pvc.yaml",
                                                 "c/quiet/cm.yaml", "x.yaml", "y.yaml"]
    deployment, namespace, claim = doc["steps"][:3]
    assert set(namespace) == {"op", "urn", "type", "name", "parent", "file", "object"}
    assert deployment["diffs"][1] == {"path": "metadata.labels.x", "kind": "add", "new": "y", "replaceReason": None}
    assert "replaceReasons" not in deployment
    assert (claim["replaceReasons"], claim["flux"]) == (["spec.storageClassName: immutable"], ["one", "two"])
    assert doc["outputs"] == {"recorded": True, "unchanged": 3, "changes": [
        {"path": "plexGpuAccess", "kind": "update", "old": "host-path", "new": "device-plugin", "replaceReason": None}]}
    assert doc["diagnostics"][1] == {"severity": "error", "message": "bad"}
    assert doc["changeSummary"] == {"create": 1, "update": 1, "replace": 1, "delete": 1, "same": 2}
    assert doc["summary"] == "Resources: 1 to create, 1 to update, 1 to replace, 1 to delete, 2 unchanged"
    assert (doc["stack"], doc["out"], doc["index"]) == ("dev", "/repo", "clusters/dev/gpu-platform/.gitops-export.json")
    assert render_json(sample_plan()).endswith("}\n") and "é" in render_json(Plan("é", "p", "/o", None))


# --- what the survivors of `make mutate` asked for ----------------------------------------------------------------

def test_a_date_read_back_from_the_repository_against_the_same_text_is_shown_as_it_is():
    import datetime

    assert shown_pair(datetime.date(2024, 1, 1), "2024-01-01") == ('"2024-01-01"', '"2024-01-01"')


def nested_plan(inner_op: str = "same") -> Plan:
    """Stack -> outer component -> inner component -> two objects, and an empty component beside the outer one."""
    plan = Plan(stack="dev", project="p", out="/o", index="i.json")
    root = plan.root_urn
    plan.components = [Step("same", "A", "c", "outer", root), Step("same", "B", "c", "inner", "A"),
                       Step("same", "E", "c", "empty", root)]
    plan.steps = [Step("same", "B$1", "k", "one", "B", "a.yaml", {"kind": "ConfigMap", "name": "one"}),
                  Step(inner_op, "B$2", "k", "two", "B", "b.yaml", {"kind": "ConfigMap", "name": "two"},
                       [Change("data.a", "update", "1", "2")] if inner_op == "update" else [])]
    return plan


def test_a_component_whose_whole_subtree_is_unchanged_is_one_folded_row_counting_its_objects():
    lines = render_text(nested_plan()).splitlines()
    assert lines[2:6] == ["     Type                 Name   Plan",
                          "     pulumi:pulumi:Stack  p-dev",
                          "     ├─ c                 empty  0 unchanged",
                          "     └─ c                 outer  2 unchanged"]


def test_a_change_deep_in_a_subtree_unfolds_every_component_above_it():
    lines = render_text(nested_plan("update")).splitlines()
    assert lines[4:10] == ["     ├─ c                 empty  0 unchanged",
                           "     └─ c                 outer",
                           "        └─ c              inner",
                           " ~         ├─ k           two    update",
                           "           │      ~ data.a: \"1\" => \"2\"",
                           "           └─ 1 unchanged"]


def test_a_fold_row_deeper_than_any_type_does_not_widen_the_type_column():
    plan = Plan(stack="dev", project="p", out="/o", index="i.json")
    parents = [plan.root_urn, "A", "B", "C", "D"]
    plan.components = [Step("same", urn, "c", f"n{i}", parents[i]) for i, urn in enumerate(parents[1:])]
    plan.steps = [Step("update", "D$1", "k", "x", "D", "x.yaml", {"kind": "ConfigMap", "name": "x"}),
                  Step("same", "D$2", "k", "y", "D", "y.yaml", {"kind": "ConfigMap", "name": "y"})]
    lines = render_text(plan).splitlines()
    assert lines[2] == "     Type                 Name   Plan"
    assert lines[-5] == "                 └─ 1 unchanged"


def test_the_json_plan_is_indented_by_two_and_shows_dates_as_text():
    import datetime

    plan = Plan(stack="dev", project="p", out="/o", index=None)
    plan.outputs = [Change("since", "update", datetime.date(2024, 1, 1), "2024-01-02")]
    text = render_json(plan)
    assert text.startswith('{\n  "stack": "dev",\n  "out": "/o",\n')
    assert json.loads(text)["outputs"]["changes"][0]["old"] == "2024-01-01"


def test_a_plan_of_an_empty_program_is_the_stack_row_alone():
    text = render_text(Plan(stack="dev", project="p", out="/o", index=None))
    assert text.splitlines()[2:4] == ["     Type                 Name   Plan", "     pulumi:pulumi:Stack  p-dev"]


def test_several_replacements_are_named_in_the_closing_warning():
    plan = Plan(stack="dev", project="p", out="/o", index=None)
    plan.steps = [Step("replace", f"u{i}", "t", n, plan.root_urn, f"{n}.yaml", {"kind": "Job", "name": n},
                       [Change("spec.template", "update", 1, 2, replace="why")]) for i, n in enumerate("ab")]
    assert "\n!! 2 to replace (Job a, Job b): Kubernetes refuses these changes in place; " in render_text(plan)
