"""The one shape of a refusal (model/errors.py): RefusalError holds one line per problem, each
`<file>: <key or path>: <problem>; hint: <fix>`, and reads as the lines joined; the program's refusals are also the
Pulumi CLI's RunError."""

from __future__ import annotations

import pulumi
import pytest

from components.flux import GraphError
from model.errors import RefusalError

LINES = ['Pulumi.prod.yaml: gpu-platform:plex.imageTag: "": empty; hint: give the image tag',
         "evidence/prod.yaml: nodes.k3s-prod-1: 0: not a count of 1 or more; hint: regenerate it"]


def test_a_refusal_keeps_its_lines_and_reads_as_them_joined_one_a_line():
    refusal = RefusalError(LINES)
    assert refusal.lines == LINES
    assert str(refusal) == LINES[0] + "\n" + LINES[1]
    assert refusal.args == (LINES[0] + "\n" + LINES[1],)


def test_a_refusal_of_one_problem_reads_as_its_one_line():
    assert str(RefusalError(LINES[:1])) == 'Pulumi.prod.yaml: gpu-platform:plex.imageTag: "": empty; hint: give the ' \
                                           "image tag"


def test_a_refusal_takes_its_lines_from_any_iterable_once_and_keeps_them_as_a_list():
    refusal = RefusalError(line for line in LINES)
    assert refusal.lines == LINES
    assert str(refusal) == "\n".join(LINES)


def test_a_refusal_from_the_program_is_also_a_pulumi_run_error_with_the_same_lines():
    with pytest.raises(RefusalError) as caught:
        raise GraphError(LINES)
    assert isinstance(caught.value, pulumi.RunError)
    assert caught.value.lines == LINES
    assert str(caught.value) == "\n".join(LINES)
