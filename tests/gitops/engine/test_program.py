"""gitops/engine/program.py: what the mock engine captures of a program run, a value Pulumi marks secret above all: it
is replaced by a placeholder and its path recorded, in a hand-made wire struct and in the real program, whose secret
the export then refuses without ever printing it."""

from __future__ import annotations

import re

from conftest import ROOT, export, make_project, stack_text


def test_capture_replaces_a_secret_value_by_a_placeholder_and_records_its_path():
    from gitops.engine.program import SECRET_PLACEHOLDER, _plain, _secret_paths
    wire = {"spec": {"token": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "x"},
                     "name": "plain"}}
    found: list[str] = []
    assert _plain(wire, "", found) == {"spec": {"token": SECRET_PLACEHOLDER, "name": "plain"}}
    assert found == ["spec.token"]
    assert _secret_paths(wire) == ["spec.token"]  # the fallback walker over the raw wire struct agrees
    assert _secret_paths({"spec": {"token": "x"}}) == []


LEAKY_MAIN = '''
import runpy
import pulumi
import pulumi_kubernetes as k8s

program = runpy.run_path({main!r}, run_name="__main__")
# A value marked secret in Pulumi, placed in an object the export would write.
k8s.core.v1.ConfigMap("plex-leak", metadata={{"name": "leak", "namespace": "plex"}},
                      data={{"token": pulumi.Output.secret("s3cr3t-claim")}},
                      opts=pulumi.ResourceOptions(parent=program["apps"]["plex"], provider=program["provider"]))
'''


def test_a_pulumi_secret_in_the_real_program_is_refused_and_never_printed(tmp_path, capsys):
    project = make_project(tmp_path / "p", {"dev": stack_text("dev")})
    (project / "__main__.py").write_text(LEAKY_MAIN.format(main=str(ROOT / "__main__.py")))
    out = tmp_path / "out"
    assert export(out, "dev", project=project) == 2
    err = capsys.readouterr().err
    # One line: the schema check, which the secret's placeholder fails too, says nothing more about that object.
    # The SDK marks the whole `data` map secret once one of its values is (`data`, or `data.token` in older SDKs).
    lines = [line for line in err.splitlines() if not line.startswith(("WARNING", "  next:"))]
    assert len(lines) == 2 and lines[1] == "nothing was written", err
    assert re.fullmatch(r"error: components/dev/plex/configmap\.leak\.yaml \(ConfigMap plex/leak\): data(\.token)?: "
                        r"holds a Pulumi secret value, which would land in plaintext; hint: reference a Secret by name "
                        r"instead", lines[0]), err
    assert "s3cr3t" not in err and list(out.iterdir()) == []
