"""The bounded tier of the differential test (issue 30): generated repository trees, and the cases earlier sweeps
found (tests/fixtures/walk-cases/), judged by the walk and by Flux's own build, `flux build kustomization --dry-run
--in-memory-build --strict-substitute` per Kustomization (tests/differential/verdicts.py). About 1 s a tree; the
long run is `make fuzz-walk TREES=2000`."""

from __future__ import annotations

import pytest

from differential.cases import CASES, DIFFERENCES_DIR, case_tree
from differential.sweep import FLUX, judge, report, sweep
from differential.verdicts import flux_build

pytestmark = pytest.mark.e2e

# A different seed from the fast tier's: these trees are not the ones kustomize judged.
E2E_TREES = 120
E2E_SEED = 2030


@pytest.fixture(autouse=True, scope="module")
def _flux_is_built() -> None:
    if not FLUX.is_file():
        pytest.fail(f"{FLUX}: not built; hint: run `make tools` (make e2e does)")


def test_the_walk_agrees_with_flux_build_on_every_generated_tree(record_property):
    result = sweep(E2E_TREES, "flux", E2E_SEED)
    record_property("figures", result.summary("flux", 0).rsplit(";", 1)[0] + ")")
    assert result.trees == E2E_TREES
    assert result.kustomizations > result.refused > 0
    assert not result.found, report(result.found[:1])


@pytest.mark.parametrize("case", CASES)
def test_the_walk_agrees_with_flux_build_on_each_case_an_earlier_sweep_found(tmp_path, case):
    (tmp_path / "home").mkdir()
    assert not judge(case_tree(case), tmp_path, flux_build(FLUX, tmp_path / "home"))


# --- where the walk knowingly differs (docs/flux-walk.md, "Where the walk differs from Flux") ----------------------

def test_a_misspelt_field_in_a_kustomization_file_is_refused_by_the_walk_where_flux_drops_it(tmp_path):
    """Flux's generator reads the folder's kustomization into kustomize's struct and writes it back: `commonLabelz`
    is dropped without a word and the build goes on. kustomize (and the walk, and a `kustomize build` in the user's
    CI) refuses the unknown field: a misspelt field is a mistake to hear about, not to apply without."""
    (tmp_path / "home").mkdir()
    tree = case_tree("misspelt-field-in-a-kustomization-file", DIFFERENCES_DIR)
    (line,) = judge(tree, tmp_path, flux_build(FLUX, tmp_path / "home"))
    assert line.startswith("flux-system/dashboards: the walk refuses (kubernetes/dashboards: kustomize build failed: "
                           'invalid Kustomization: json: unknown field "commonLabelz"), '), line
    assert line.endswith("the oracle builds ()"), line


def test_an_undefined_variable_is_refused_by_the_walk_where_flux_without_strict_substitution_empties_it(tmp_path):
    """With strict substitution (`--strict-substitute`, the controller's StrictPostBuildSubstitutions) Flux fails the
    Kustomization as the walk does (the case agrees in the tier above); without it Flux applies the empty text. The
    walk holds every repository to strict (an empty zone where `${UNDEFINED_ZONE}` was meant is a broken app) and, as
    Flux's default does, still walks what that Kustomization applies."""
    (tmp_path / "home").mkdir()
    tree = case_tree("undefined-variable-without-strict-substitution", DIFFERENCES_DIR)
    assert sorted(judge(tree, tmp_path, flux_build(FLUX, tmp_path / "home", strict_=False))) == [
        "flux-system/apps: the walk refuses (kubernetes/apps/cm.yaml (ConfigMap default/settings): data.zone: "
        "${UNDEFINED_ZONE} is not defined for flux-system/apps, which applies it (its variables: ENABLED, MULTI, "
        "REPLICAS); Flux's strict substitution would fail the whole Kustomization; hint: define it in the ConfigMap "
        "or Secret that Kustomization substitutes from, or give it a default (${VAR:=value})), the oracle builds ()"]
