"""The bounded tier of the differential test (issue 30): generated repository trees, and the cases earlier sweeps
found (tests/fixtures/walk-cases/), judged by the walk and by Flux's own build, `flux build kustomization --dry-run
--in-memory-build --strict-substitute` per Kustomization (tests/differential/verdicts.py). About 1 s a tree; the
long run is `make fuzz-walk TREES=2000`."""

from __future__ import annotations

import pytest

from differential.cases import CASES, case_tree
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
    record_property("walk-diff", result.summary("flux", 0).rsplit(";", 1)[0] + ")")
    assert result.trees == E2E_TREES
    assert result.kustomizations > result.refused > 0
    assert not result.found, report(result.found[:1])


@pytest.mark.parametrize("case", CASES)
def test_the_walk_agrees_with_flux_build_on_each_case_an_earlier_sweep_found(tmp_path, case):
    (tmp_path / "home").mkdir()
    assert not judge(case_tree(case), tmp_path, flux_build(FLUX, tmp_path / "home"))
