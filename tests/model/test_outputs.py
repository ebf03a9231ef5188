"""model/outputs.py: the stack outputs the export reads, typed. What the real program exports reads back with
`from_output` and writes again with `as_output` exactly as it was (the index records it and the preview diffs it);
the DRA route's fields appear only on that route; an output an older program wrote, without the newer keys, reads
with their defaults."""

from __future__ import annotations

import dataclasses

from model.outputs import (
    AppPolicy,
    BootstrapRef,
    DeliveredOutput,
    DraMigrationOutput,
    FluxGraph,
    GpuAppOutput,
    GraphKustomization,
    ProgramOutputs,
)


def test_every_output_the_export_reads_writes_back_as_the_program_exported_it(captures):
    for stack, capture in captures.items():
        out = capture.stack_outputs
        typed = ProgramOutputs.from_output(stack, out)
        assert typed.layout.stack == stack and typed.layout.as_output() == out["layout"]
        assert typed.flux_graph.as_output() == out["fluxGraph"]
        assert typed.app_policy.as_output() == out["appPolicy"]
        assert {name: app.as_output() for name, app in typed.gpu_apps.items()} == out["gpuApps"]
        assert list(typed.nodes) == out["nodes"] and typed.gpu_shares_per_node == out["gpuSharesPerNode"]
        assert typed.flux_graph.bootstrap.key == (out["fluxGraph"]["bootstrap"]["namespace"],
                                                  out["fluxGraph"]["bootstrap"]["name"])


def graph() -> FluxGraph:
    return FluxGraph(
        namespace="flux-system", bootstrap=BootstrapRef("flux-system", "flux-system", "repo", "./clusters/lab"),
        plugin=("flux-system", "intel-gpu-plugin"), cni=("flux-system", "cilium"),
        kustomizations=(GraphKustomization("cilium", "flux-system", declared=True),
                        GraphKustomization("apps", "apps", declared=False),
                        GraphKustomization("plex", "flux-system", declared=True, owned=True, path="./c/plex")),
        components={"plex": DeliveredOutput(("flux-system", "plex"), "c/plex", ("apps", "apps"), 480, "slow")},
        plugin_folder="c/intel-gpu-plugin")


def test_the_flux_graph_reads_back_as_written_and_says_which_kustomizations_are_the_exports():
    written = graph()
    out = written.as_output()
    assert "driver" not in out and "driverDependents" not in out  # the device-plugin route's output as it was
    assert FluxGraph.from_output(out) == written
    assert written.exported == {("flux-system", "cilium"), ("flux-system", "plex")}
    assert written.repository_tiers == [("apps", "apps")]
    assert (written.bootstrap.key, written.bootstrap.source_key) == (("flux-system", "flux-system"),
                                                                     ("flux-system", "repo"))


def test_the_dra_routes_fields_are_written_only_on_that_route_and_read_back():
    dra = dataclasses.replace(graph(), plugin=None, driver=("flux-system", "intel-gpu-dra"),
                              driver_folder="c/intel-gpu-dra", driver_dependents=(("flux-system", "plex"),))
    out = dra.as_output()
    assert (out["plugin"], out["driver"], out["driverFolder"], out["driverDependents"]) == (
        None, ["flux-system", "intel-gpu-dra"], "c/intel-gpu-dra", [["flux-system", "plex"]])
    assert FluxGraph.from_output(out) == dra
    migration = DraMigrationOutput("apps-on-claims", 3, True, ("plex",), ("jellyfin",), "step 4: prove it",
                                   ("media",))
    assert DraMigrationOutput.from_output(migration.as_output()) == migration


def test_an_output_an_older_program_wrote_reads_with_the_defaults():
    assert BootstrapRef.from_output({"name": "boot", "namespace": "fs"}) == BootstrapRef("boot", "fs", "boot", "")
    assert GraphKustomization.from_output({"name": "a", "namespace": "n", "declared": 1}) == \
        GraphKustomization("a", "n", True, False, None)
    assert DeliveredOutput.from_output({"kustomization": ["n", "k"], "folder": "f", "tier": None}) == \
        DeliveredOutput(("n", "k"), "f")
    assert AppPolicy.from_output(None) == AppPolicy() == AppPolicy.from_output({})
    assert GpuAppOutput.from_output({}) == GpuAppOutput(access="unknown", reason="")
    assert DraMigrationOutput.from_output({"stage": "driver-added", "step": "1", "plugin": True}) == \
        DraMigrationOutput("driver-added", 1, True, (), (), "")


def test_an_app_the_repository_delivers_says_so_and_one_the_export_delivers_does_not():
    mine = GpuAppOutput("device-plugin", "evidence", devices=2, open_test_prefix="s6")
    assert mine.as_output() == {"access": "device-plugin", "reason": "evidence", "devices": 2, "openTestPrefix": "s6"}
    theirs = GpuAppOutput("host-path", "no evidence", delivered_by="repository")
    assert theirs.as_output()["deliveredBy"] == "repository"
    assert GpuAppOutput.from_output(theirs.as_output()) == theirs and GpuAppOutput.from_output(mine.as_output()) == mine
