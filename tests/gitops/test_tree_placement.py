"""gitops/tree.py's two placement refusals (PlacementError), on captures made by hand: a Kubernetes object whose top
component has no export folder in PLACEMENTS, and two objects that would be written to one file. Then the export
command, which turns either into one `error:` line and writes nothing."""

from __future__ import annotations

import pytest

from builders import capture_tree
from components.flux import FluxDeliveryGraph
from components.gpu_app import GpuApp
from conftest import LAB_LAYOUT, export, make_project, stack_text
from gitops.engine.program import Capture, Registration
from gitops.tree import PLACEMENTS, PlacementError
from model.layout import Layout, SplitLayout

STACK = "urn:pulumi:lab::gpu-platform::pulumi:pulumi:Stack::gpu-platform-lab"
PROVIDER = "urn:pulumi:lab::gpu-platform::pulumi:pulumi:Stack$pulumi:providers:kubernetes::k8s-lab::k8s-lab-id"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
WIDGET = "acme:components:Widget"  # a component gitops/tree.py does not know


def component(type_: str, name: str) -> Registration:
    return Registration(urn=f"urn:pulumi:lab::gpu-platform::pulumi:pulumi:Stack${type_}::{name}", type=type_,
                        name=name, parent=STACK, dependencies=(), provider="", custom=False, inputs={},
                        secret_paths=())


def config_map(name: str, parent: Registration | None, object_name: str | None = None,
               namespace: str = "default") -> Registration:
    """A ConfigMap registered as `name`, a child of `parent` (None: of the stack itself, in no component)."""
    parent_urn = parent.urn if parent else STACK
    chain = parent_urn.split("::")[-2]  # the parent's type chain, as the engine builds a child's URN
    return Registration(urn=f"urn:pulumi:lab::gpu-platform::{chain}${CONFIG_MAP}::{name}", type=CONFIG_MAP, name=name,
                        parent=parent_urn, dependencies=(), provider=PROVIDER, custom=True,
                        inputs={"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": object_name or name, "namespace": namespace}},
                        secret_paths=())


def capture(*registrations: Registration, layout: Layout = LAB_LAYOUT) -> Capture:
    return Capture(stack="lab", registrations=list(registrations), stack_outputs={"layout": layout.as_output()})


def refusal(capture: Capture) -> str:
    with pytest.raises(PlacementError) as caught:
        capture_tree(capture)
    return str(caught.value)


FLUX = component(FluxDeliveryGraph.TYPE, "flux")
PLEX = component(GpuApp.TYPE, "plex")


def test_a_hand_made_capture_of_known_components_is_placed_where_the_layout_says():
    tree = capture_tree(capture(FLUX, config_map("flux-cluster-vars", FLUX, "cluster-vars", "flux-system"),
                                PLEX, config_map("plex-settings", PLEX, "settings", "plex")))
    assert [o.path for o in tree.objects] == ["clusters/lab/gpu-platform/configmap.cluster-vars.yaml",
                                              "components/lab/plex/configmap.settings.yaml"]


def test_a_kubernetes_object_of_a_component_without_an_export_folder_is_refused_naming_both():
    assert WIDGET not in PLACEMENTS
    widget = component(WIDGET, "widget")
    assert refusal(capture(PLEX, config_map("plex-settings", PLEX), widget, config_map("widget-config", widget))) == (
        "kubernetes:core/v1:ConfigMap widget-config: its component acme:components:Widget has no export folder in "
        "gitops/tree.py")


def test_a_kubernetes_object_in_no_component_is_refused_as_its_own_component():
    assert refusal(capture(PLEX, config_map("stray", None))) == (
        "kubernetes:core/v1:ConfigMap stray: its component kubernetes:core/v1:ConfigMap has no export folder in "
        "gitops/tree.py")


def test_a_component_without_an_export_folder_is_no_refusal_while_it_holds_no_kubernetes_object():
    widget = component(WIDGET, "widget")
    provider = Registration(urn=PROVIDER.rsplit("::", 1)[0], type="pulumi:providers:kubernetes", name="k8s-lab",
                            parent=STACK, dependencies=(), provider="", custom=True, inputs={}, secret_paths=())
    tree = capture_tree(capture(provider, widget, PLEX, config_map("plex-settings", PLEX, "settings", "plex")))
    assert [o.path for o in tree.objects] == ["components/lab/plex/configmap.settings.yaml"]


def test_two_objects_of_one_component_for_one_file_are_refused_naming_both():
    assert refusal(capture(PLEX, config_map("plex-a", PLEX, "settings", "plex"),
                           config_map("plex-b", PLEX, "settings", "media"))) == (
        "components/lab/plex/configmap.settings.yaml: both ConfigMap plex/settings and ConfigMap media/settings "
        "would be written here")


def test_objects_of_two_components_for_one_file_are_refused_naming_both():
    # components in the entry's parent folder: an app named like the entry lands in the entry folder itself
    layout = SplitLayout("lab", "clusters/lab/gpu-platform", "clusters/lab", "./clusters/lab")
    app = component(GpuApp.TYPE, "gpu-platform")
    assert refusal(capture(FLUX, config_map("flux-cluster-vars", FLUX, "cluster-vars", "flux-system"),
                           app, config_map("app-vars", app, "cluster-vars", "gpu-platform"), layout=layout)) == (
        "clusters/lab/gpu-platform/configmap.cluster-vars.yaml: both ConfigMap flux-system/cluster-vars and "
        "ConfigMap gpu-platform/cluster-vars would be written here")


# --- the export command ------------------------------------------------------------------------------------------
# The real program with one resource more, appended to its __main__.py in a copy of the project.

STRAY = """
k8s.core.v1.ConfigMap("stray", metadata=k8s.meta.v1.ObjectMetaArgs(name="stray", namespace="default"),
                      opts=pulumi.ResourceOptions(provider=provider))
"""
TWIN = """
k8s.core.v1.Service("plex-twin", metadata=k8s.meta.v1.ObjectMetaArgs(name="plex", namespace="media"),
                    opts=pulumi.ResourceOptions(parent=apps["plex"], provider=provider))
"""


@pytest.mark.parametrize(("extra", "lines"), [
    (STRAY, ["kubernetes:core/v1:ConfigMap stray: its component kubernetes:core/v1:ConfigMap has no export folder "
             "in gitops/tree.py"]),
    # the two Services are named in the order the engine received them, which is not the program's order
    (TWIN, [f"components/dev/plex/service.plex.yaml: both Service {a} and Service {b} would be written here"
            for a, b in (("plex/plex", "media/plex"), ("media/plex", "plex/plex"))]),
], ids=["object-in-no-component", "two-objects-for-one-file"])
def test_the_export_refuses_a_placement_with_one_error_line_and_writes_nothing(tmp_path, capsys, extra, lines):
    project = make_project(tmp_path / "project", {"dev": stack_text("dev")})
    with (project / "__main__.py").open("a") as main:
        main.write(extra)
    out = tmp_path / "out"
    assert export(out, "dev", project=project) == 2
    captured = capsys.readouterr()
    assert captured.err in [f"error: {line}\nnothing was written\n" for line in lines]
    assert list(out.iterdir()) == []
