"""mutation/fast_first.py: a mutant's tests fastest first, read from the durations mutmut records (a contract with
mutmut's stats file, which is not its public API: a change of its format fails here, not as a slow `make mutate`)."""

from __future__ import annotations

from pathlib import Path

from mutation.fast_first import fastest_first, recorded_durations


def test_files_go_by_their_total_time_and_tests_by_their_own_within_a_file():
    durations = {"slow.py::a": 30.0, "slow.py::b": 7.0, "fast.py::c": 0.5, "fast.py::d": 0.1, "new.py::e": 0.0}
    assert fastest_first(list(durations), durations) == [
        "new.py::e", "fast.py::d", "fast.py::c", "slow.py::b", "slow.py::a"]


def test_a_test_mutmut_has_no_time_for_counts_as_instant_and_ties_keep_their_order():
    assert fastest_first(["x.py::b", "x.py::a", "y.py::c"], {"y.py::c": 1.0}) == ["x.py::b", "x.py::a", "y.py::c"]


def test_the_durations_are_read_from_the_file_mutmuts_own_writer_makes(tmp_path: Path, monkeypatch):
    from mutmut.state import state
    from mutmut.stats import save_stats

    (tmp_path / "mutants").mkdir()
    (tmp_path / "setup.cfg").write_text("[mutmut]\nsource_paths=code.py\n")  # mutmut reads its config to save
    (tmp_path / "code.py").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(state(), "duration_by_test", {"tests/t.py::test_x": 1.5})
    save_stats()  # writes mutants/mutmut-stats.json, the folder a mutant's tests run in
    assert recorded_durations(tmp_path / "mutants" / "mutmut-stats.json") == {"tests/t.py::test_x": 1.5}


def test_no_stats_yet_or_an_unreadable_file_orders_nothing(tmp_path: Path):
    assert recorded_durations(tmp_path / "missing.json") == {}
    (tmp_path / "bad.json").write_text("{not json")
    assert recorded_durations(tmp_path / "bad.json") == {}
