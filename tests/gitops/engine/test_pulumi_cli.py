"""The environment the Pulumi CLI runs with (gitops/engine/pulumi_cli.py); the CLI itself is judged in
tests/e2e/test_pulumi_cli_engine.py."""

from __future__ import annotations

import os
from pathlib import Path

from gitops.engine.pulumi_cli import ENGINE_ENV, TOOLS_BIN, Site, engine_env

SITE = Site(stack="dev", root=Path("/sites/dev"), pulumi=Path("/opt/pulumi/bin/pulumi"))


def test_a_container_without_user_or_home_still_gives_the_cli_a_user_and_a_home():
    env = engine_env(SITE, {"PATH": "/usr/bin"})
    assert env["USER"] in {f"uid-{os.getuid()}", _passwd_name()}
    assert env["HOME"] == "/sites/dev/home"


def test_logname_names_the_user_when_user_is_unset():
    assert engine_env(SITE, {"LOGNAME": "ops", "HOME": "/home/ops"})["USER"] == "ops"


def test_the_callers_user_and_home_are_left_to_the_inherited_environment():
    env = engine_env(SITE, {"USER": "alice", "HOME": "/home/alice", "PATH": "/usr/bin"})
    assert "USER" not in env and "HOME" not in env


def test_the_cli_runs_offline_against_the_sites_file_backend_with_the_provider_beside_it_on_path():
    env = engine_env(SITE, {"USER": "alice", "HOME": "/home/alice", "PATH": "/usr/bin"})
    assert {k: env[k] for k in ENGINE_ENV} == ENGINE_ENV
    assert env["PULUMI_BACKEND_URL"] == "file:///sites/dev/state"
    assert env["PATH"].split(os.pathsep) == ["/opt/pulumi/bin", str(TOOLS_BIN), "/usr/bin"]


def _passwd_name() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return f"uid-{os.getuid()}"
