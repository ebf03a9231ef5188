"""gitops/reports/renderer_change.py: the change the gate needs in a rendered file, and only that: the device
plugin's limit (or the DRA claim) added, the /dev/dri hostPath and its mounts gone, as a line edit of the file as the
repository holds it; the rest of the program's object apart, as optional; a file a line edit cannot be sure of gets
the fields instead of a diff."""

from __future__ import annotations

import textwrap

import yaml

from gitops.reports.renderer_change import RendererChange, needed_object, once_per_export, renderer_change
from model.evidence import RESOURCE, held_access

RENDERED = textwrap.dedent("""\
    # Rendered by catalog/render.py. Do not edit.
    ---
    apiVersion: v1
    kind: Namespace
    metadata:
      name: plex
    ---
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: plex
      namespace: plex
    spec:
      template:
        spec:
          containers:
            - image: plex:1
              name: plex
              resources:
                limits:
                  memory: 4Gi
              volumeMounts:
                - mountPath: /config
                  name: config
                - mountPath: /dev/dri
                  name: dri
          volumes:
            - name: config
              emptyDir: {}
            - hostPath:
                path: /dev/dri
                type: Directory
              name: dri
    """)


def program(access: str) -> dict:
    container = {"image": "plex:2", "name": "plex", "resources": {"limits": {"memory": "4Gi"}},
                 "volumeMounts": [{"mountPath": "/config", "name": "config"}],
                 "securityContext": {"readOnlyRootFilesystem": True}}
    pod: dict = {"containers": [container], "volumes": [{"name": "config", "emptyDir": {}}]}
    if access == "device-plugin":
        container["resources"]["limits"][RESOURCE] = "1"
    else:
        container["resources"]["claims"] = [{"name": "gpu"}]
        pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "plex-gpu"}]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "plex", "namespace": "plex"},
            "spec": {"template": {"spec": pod}}}


def theirs(text: str = RENDERED) -> dict:
    return next(d for d in yaml.safe_load_all(text) if d and d["kind"] == "Deployment")


def changed_lines(change: RendererChange) -> list[str]:
    return [line for line in change.diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def test_the_needed_object_is_the_repositorys_with_only_the_gates_fields_changed():
    needed = needed_object(theirs(), program("device-plugin"), "device-plugin")
    pod = needed["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"] == {"memory": "4Gi", RESOURCE: "1"}
    assert pod["containers"][0]["image"] == "plex:1"  # not the program's: the gate does not need it
    assert [v["name"] for v in pod["volumes"]] == ["config"]
    assert [m["name"] for m in pod["containers"][0]["volumeMounts"]] == ["config"]
    assert held_access(needed) == "device-plugin"


def test_the_change_is_a_diff_of_the_file_with_the_limit_added_and_the_host_path_gone_every_other_byte_kept():
    change = renderer_change("plex", ("prod",), theirs(), program("device-plugin"), "device-plugin",
                             "apps/plex.yaml", RENDERED.encode())
    assert change.diff[:2] == ("--- apps/plex.yaml (repository)", "+++ apps/plex.yaml (needed)")
    assert changed_lines(change) == [f"+              {RESOURCE}: '1'", "-            - mountPath: /dev/dri",
                                     "-              name: dri", "-        - hostPath:", "-            path: /dev/dri",
                                     "-            type: Directory", "-          name: dri"]
    assert change.needed == (f"spec.template.spec.containers[0].resources.limits.{RESOURCE}: (absent) -> '1'",
                             "spec.template.spec.containers[0].volumeMounts[1].mountPath: '/dev/dri' -> (absent)",
                             "spec.template.spec.containers[0].volumeMounts[1].name: 'dri' -> (absent)",
                             "spec.template.spec.volumes[1].hostPath.path: '/dev/dri' -> (absent)",
                             "spec.template.spec.volumes[1].hostPath.type: 'Directory' -> (absent)",
                             "spec.template.spec.volumes[1].name: 'dri' -> (absent)")
    assert change.optional == ("spec.template.spec.containers[0].image: 'plex:1' -> 'plex:2'",
                               "spec.template.spec.containers[0].securityContext.readOnlyRootFilesystem: (absent) "
                               "-> True")


def test_a_file_without_indented_sequences_or_limits_gets_lines_in_its_own_style_and_an_emptied_list_goes():
    flat = textwrap.dedent("""\
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: plex
        spec:
          template:
            spec:
              containers:
              - name: plex
                image: plex:1
                volumeMounts:
                - {mountPath: /dev/dri, name: dri}
              volumes:
              - name: dri
                hostPath: {path: /dev/dri}
        """)
    change = renderer_change("plex", ("prod",), theirs(flat), program("device-plugin"), "device-plugin",
                             "apps/plex.yaml", flat.encode())
    # a list left empty goes with its key; the new lines follow the file's indentation, sequences not indented
    assert changed_lines(change) == ["-        volumeMounts:", "-        - {mountPath: /dev/dri, name: dri}",
                                     "-      volumes:", "-      - name: dri", "-        hostPath: {path: /dev/dri}",
                                     "+        resources:", "+          limits:", f"+            {RESOURCE}: '1'"]


def test_the_dra_route_adds_the_claim_and_drops_the_host_path():
    change = renderer_change("plex", ("prod",), theirs(), program("dra-claim"), "dra-claim", "apps/plex.yaml",
                             RENDERED.encode())
    added = [line for line in changed_lines(change) if line.startswith("+")]
    assert added == ["+            claims:", "+              - name: gpu", "+      resourceClaims:",
                     "+        - name: gpu", "+          resourceClaimTemplateName: plex-gpu"]
    assert "claim of class gpu.intel.com" in change.line()


def test_a_file_a_line_edit_cannot_be_sure_of_gets_the_fields_instead_of_a_diff():
    flow = RENDERED.replace("limits:\n              memory: 4Gi", "limits: {memory: 4Gi}")
    assert flow != RENDERED
    change = renderer_change("plex", ("prod",), theirs(flow), program("device-plugin"), "device-plugin",
                             "apps/plex.yaml", flow.encode())
    assert change.diff == () and change.needed
    assert change.line().endswith("hold these fields: " + "; ".join(change.needed))
    unreadable = renderer_change("plex", ("prod",), theirs(), program("device-plugin"), "device-plugin",
                                 "apps/plex.yaml", None)
    assert unreadable.diff == () and "```diff" not in "\n".join(unreadable.markdown())


def test_the_same_change_of_two_stacks_is_one_naming_both():
    one = renderer_change("plex", ("prod",), theirs(), program("device-plugin"), "device-plugin", "apps/plex.yaml",
                          RENDERED.encode())
    two = renderer_change("plex", ("dev",), theirs(), program("device-plugin"), "device-plugin", "apps/plex.yaml",
                          RENDERED.encode())
    (merged,) = once_per_export([one, two])
    assert merged.stacks == ("prod", "dev") and merged.line().startswith("plex: evidence for prod, dev allows")
    other = renderer_change("plex", ("lab",), theirs(), program("device-plugin"), "device-plugin", "apps/lab.yaml",
                            RENDERED.encode())
    assert len(once_per_export([one, other])) == 2


def test_a_repository_object_of_another_shape_gets_no_change_and_no_traceback():
    from gitops.flux.inventory import FluxView, ObjectId
    from gitops.reports.renderer_change import changes_of
    from gitops.tree import ExportedObject, Tree
    from model.layout import SplitLayout
    from model.outputs import GpuAppOutput

    tree = Tree("lab", SplitLayout("lab", "clusters/lab/gpu-platform", "components/lab", "./clusters/lab"),
                references=[ExportedObject("", program("device-plugin"), None, "GpuApp", "plex")])  # type: ignore[arg-type]
    apps = {"plex": GpuAppOutput("device-plugin", "evidence", delivered_by="repository")}
    for pod in ({"containers": "odd"}, {"containers": []}, {"containers": [{"name": "plex", "resources": [1]}]},
                {"containers": [{"name": "plex"}], "volumes": "odd"}, "odd"):
        view = FluxView(bootstrap=("flux-system", "flux-system"))
        odd = {**theirs(), "spec": {"template": {"spec": pod}}}
        view.manifests[ObjectId.of(odd)], view.origins[ObjectId.of(odd)] = odd, "apps/plex.yaml"
        assert changes_of(tree, apps, view, lambda rel: RENDERED.encode()) == []
    view.manifests[ObjectId.of(odd)] = theirs()
    (change,) = changes_of(tree, apps, view, lambda rel: RENDERED.encode())
    assert change.file == "apps/plex.yaml" and change.diff
