"""model/labels.py: every label and annotation name is a valid Kubernetes key, and the cluster's own Kyverno
policies (policy/kyverno/) read the same names the program writes and policy/rules.py reads."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT
from model import labels
from model.config.values import LABEL_KEY

NAMES = {name: value for name, value in vars(labels).items() if name.endswith(("_LABEL", "_ANNOTATION"))}


def test_the_module_names_every_label_and_annotation_once():
    assert len(NAMES) == 4 and len(set(NAMES.values())) == len(NAMES)


@pytest.mark.parametrize("name", sorted(NAMES))
def test_each_name_is_a_kubernetes_label_key(name):
    assert re.fullmatch(LABEL_KEY, NAMES[name])


@pytest.mark.parametrize("name", sorted(NAMES))
def test_the_cluster_s_kyverno_policies_know_each_name(name):
    policies = "\n".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "policy" / "kyverno").glob("*.yaml")))
    assert NAMES[name] in policies
