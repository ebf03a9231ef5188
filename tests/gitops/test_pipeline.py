"""gitops/pipeline.py: the refusal the pipeline raises for OUT (OutRefusedError): its lines, the message they make,
and whether anything was written or recovered before it; and the drift of a file every stack of a shared base
writes, reported once."""

from __future__ import annotations

from gitops.pipeline import OutRefusedError


def test_a_refusal_of_the_walk_is_its_lines_and_says_nothing_was_written():
    error = OutRefusedError(["one", "two"])  # what the export raises with check_stack's lines
    assert (error.lines, str(error), error.written, error.recovered) == (["one", "two"], "one\ntwo", False, [])


def test_drift_of_a_file_every_stack_of_a_shared_base_writes_is_reported_once_with_its_diff():
    from gitops.pipeline import _once

    dev = ["changed  clusters/base/cilium.yaml", "  --- a/clusters/base/cilium.yaml", "  -x", "missing  a.yaml"]
    prod = ["changed  clusters/base/cilium.yaml", "  --- a/clusters/base/cilium.yaml", "  -x", "missing  b.yaml",
            "  detail of b"]
    assert _once(dev + prod) == dev + ["missing  b.yaml", "  detail of b"]
    assert _once(["  a leading diff line", "x", "x"]) == ["  a leading diff line", "x"]
