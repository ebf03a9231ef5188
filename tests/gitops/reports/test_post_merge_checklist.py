"""The post-merge checklist is generated from the stack's config and sits next to the export."""

from __future__ import annotations

import re

import pytest

from builders import capture_tree
from conftest import COMPLETE_PROD_EVIDENCE, stack_text
from gitops.reports.post_merge import add_post_merge
from model.outputs import ProgramOutputs


def checklist(capture) -> str:
    tree = capture_tree(capture)
    outputs = ProgramOutputs.from_output(capture.stack, capture.stack_outputs)
    add_post_merge(tree, outputs)
    return tree.files[f"clusters/{capture.stack}/gpu-platform/POST-MERGE.md"].decode()


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_checklist_names_this_stacks_nodes_namespace_and_count(captures, stack):
    text = checklist(captures[stack])
    nodes = captures[stack].stack_outputs["nodes"]
    assert "flux get kustomizations intel-gpu-plugin -n flux-system" in text
    assert (f"kubectl -n intel-gpu-plugin get daemonset intel-gpu-plugin` shows "
            f"DESIRED = CURRENT = READY = {len(nodes)}") in text
    for node in nodes:
        assert f"kubectl get node {node} -o jsonpath=" in text
    assert f"make verify-nodes STACK={stack}" in text


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_checklist_stands_on_its_own_naming_no_file_the_gitops_repository_does_not_hold(captures, stack):
    """It lands in the GitOps repository, which holds neither this program's README nor its docs: every file it
    names is one the export writes beside it, and it says how to run its suite itself."""
    tree = capture_tree(captures[stack])
    add_post_merge(tree, ProgramOutputs.from_output(stack, captures[stack].stack_outputs))
    records = f"clusters/{stack}/gpu-platform"
    text = tree.files[f"{records}/POST-MERGE.md"].decode()
    named = set(re.findall(r"`([\w./-]+\.(?:md|ya?ml|json))`", text))
    assert named and all(f"{records}/{path}" in tree.files or path in tree.files for path in named), named
    assert not re.search(r"README|docs/", text)
    assert "`chainsaw test --test-dir <this folder>/post-merge` runs it against the cluster of your current " \
           "kubeconfig context (Chainsaw v0.2.15 or newer)." in text


def test_checklist_ends_with_the_uid_1000_open_of_the_render_node(captures):
    text = checklist(captures["prod"])
    assert "kubectl -n plex exec deploy/plex -- s6-setuidgid plex" in text
    assert "exec 3<>/dev/dri/renderD128" in text and "uid 1000, not uid 0" in text


def test_checklist_states_the_gate_decision(captures, run_stack_text):
    assert "- `plex`: **host-path**." in checklist(captures["prod"])
    unlocked = checklist(run_stack_text(stack_text("prod"), stack="prod", evidence=COMPLETE_PROD_EVIDENCE))
    assert "- `plex`: **device-plugin**." in unlocked


def test_checklist_has_a_plex_exists_step_before_the_device_test(captures):
    text = checklist(captures["prod"])
    exists = text.index("flux get kustomizations plex -n flux-system")
    assert "kubectl -n plex rollout status deployment/plex" in text
    assert exists < text.index("exec 3<>/dev/dri/renderD128")
