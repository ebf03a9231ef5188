"""What the mock engine (gitops/engine/program.py, gitops/engine/sdk.py) takes from the Pulumi SDK, pinned: private
helpers, the wire secret signature, MockMonitor's RegisterResource shape. An SDK upgrade that changes any of it
fails here, naming the SDK version, and the engine refuses to start in one line instead of exporting something
subtly wrong."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pulumi.runtime import mocks, rpc, stack, sync_await

from conftest import EXAMPLE, ROOT
from gitops.engine import program, sdk as engine
from gitops.export import main as export_main


def test_the_installed_sdk_offers_everything_the_engine_takes_from_it():
    problems = engine.sdk_contract_problems()
    assert not problems, f"pulumi=={engine.sdk_version()} changed what gitops/engine/sdk.py uses: {'; '.join(problems)}"


def test_the_pinned_sdk_is_in_the_supported_range():
    pinned = re.search(r"^pulumi==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M)
    assert pinned and engine.sdk_version() == pinned.group(1)
    low, below = engine.SUPPORTED_PULUMI
    version = engine._version_tuple(pinned.group(1))
    assert version is not None and low <= version < below
    engine.check_sdk()


def test_every_private_sdk_name_the_engine_uses_is_in_its_contract():
    sdk_source = (ROOT / "gitops" / "engine" / "sdk.py").read_text()
    code = sdk_source.split("def sdk_version", 1)[1]  # past the contract's own listing
    code += (ROOT / "gitops" / "engine" / "program.py").read_text()
    used = set(re.findall(r"\b(?:sync_await|rpc|sdk_stack|sdk_resource|pulumi_mocks)\.(_[A-Za-z]\w*)", code))
    listed = {dotted.rsplit(".", 1)[1] for dotted in engine.SDK_CONTRACT} | {"_special_sig_key", "_special_secret_sig"}
    assert used and used <= listed, sorted(used - listed)


@pytest.mark.parametrize("module, name", [
    (stack, "run_pulumi_func"),
    (sync_await, "_sync_await"),
    (sync_await, "_ensure_event_loop"),
    (mocks, "MockResourceArgs"),
])
def test_a_renamed_sdk_dependency_fails_the_contract_naming_the_sdk_version(monkeypatch, module, name):
    monkeypatch.setattr(module, f"{name}_renamed", getattr(module, name), raising=False)
    monkeypatch.delattr(module, name)
    problems = engine.sdk_contract_problems()
    assert f"{module.__name__}.{name} is gone" in problems
    with pytest.raises(engine.SdkError) as err:
        engine.check_sdk()
    assert err.value.lines == [
        f"requirements.txt: pulumi=={engine.sdk_version()}: lacks what gitops/engine/sdk.py takes from the SDK: "
        f"{module.__name__}.{name} is gone; hint: pin the SDK back (make lock) or adapt gitops/engine/sdk.py to it"]


def test_a_changed_signature_or_secret_signature_fails_the_contract(monkeypatch):
    def run_pulumi_func(function):  # the parameter renamed
        raise AssertionError("never called")

    monkeypatch.setattr(stack, "run_pulumi_func", run_pulumi_func)
    monkeypatch.setattr(rpc, "_special_secret_sig", "0" * 32)
    problems = engine.sdk_contract_problems()
    assert problems == [
        "pulumi.runtime.stack.run_pulumi_func takes no func",
        "the wire secret signature (pulumi.runtime.rpc._special_sig_key/_special_secret_sig) changed"]


def test_an_sdk_outside_the_supported_range_stops_every_run_in_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(engine, "sdk_version", lambda: "3.999.0")
    with pytest.raises(engine.SdkError) as err:
        program.run_program("dev", EXAMPLE)
    low, below = (".".join(map(str, v)) for v in engine.SUPPORTED_PULUMI)
    line = (f"requirements.txt: pulumi==3.999.0: outside the SDK range gitops/engine/sdk.py supports "
            f"(>={low},<{below}): it runs on SDK internals that change without notice; hint: pin pulumi in that "
            "range (make lock), or run tests/gitops/engine/test_sdk.py with 3.999.0 and widen SUPPORTED_PULUMI in "
            "gitops/engine/sdk.py")
    assert err.value.lines == [line]
    out = tmp_path / "out"
    assert export_main(["--project-dir", str(EXAMPLE), "--stack", "dev", "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"error: {line}", "nothing was written"]
    assert not Path(out).exists()
