"""The gpu_plugin flags table: it covers exactly the flags the vendored upstream source registers, every refused flag
is refused with its reason, every allowed flag passes in its valid form, and anything else is refused the way the
plugin's Go flag parser would fail on it."""

from __future__ import annotations

import dataclasses
import hashlib
import re

import pytest
from ruamel.yaml import YAML

from conftest import FIXTURES, ROOT
from model.images import INTEL_GPU_PLUGIN_TAG
from model.plugin_flags import (
    FLAGS,
    NOT_FLAGS,
    PLUGIN_VERSION,
    PluginFlag,
    check_plugin_args,
    flags_table_markdown,
)

UPSTREAM = FIXTURES / "upstream" / "intel-gpu-plugin" / "flags"
GPU_PLUGIN_GO = (UPSTREAM / "gpu_plugin.go.excerpt").read_text()
DEVICEPLUGIN_API_GO = (UPSTREAM / "deviceplugin_api.go.excerpt").read_text()
KLOG_GO = (UPSTREAM / "klog.go.excerpt").read_text()

REFUSED = [f for f in FLAGS if f.verdict == "refused"]
ALLOWED = [f for f in FLAGS if f.verdict == "allowed"]
GO_KINDS = {"Bool": "bool", "Int": "int", "String": "string", "Uint64": "uint64"}

FLAG_NAMED = {f.name: f for f in FLAGS}
NOT_DEFINED = f"is not a flag of gpu_plugin {PLUGIN_VERSION} (the plugin exits: 'flag provided but not defined')"
TABLE_HINT = f"hint: remove it; every flag of gpu_plugin {PLUGIN_VERSION} is listed in docs/plugin-flags.md"


def flag(name: str) -> PluginFlag:
    """The table's row for -name; a test that reads a row's fields expects the row to be there."""
    row = FLAG_NAMED.get(name)
    assert row is not None, f"-{name} is not in the flag table"
    return row


def _go_value(expr: str, consts: dict[str, str]) -> str:
    """A Go default expression as flag.DefValue prints it: literals unquoted, constants resolved."""
    expr = consts.get(expr, expr)
    return expr[1:-1] if expr.startswith('"') else expr


def upstream_gpu_plugin_flags() -> list[tuple[str, str, str]]:
    """(name, kind, default) of every flag.*Var call in the vendored main(), in order."""
    consts = dict(re.findall(r"^\t(\w+)\s*=\s*(\S.*)$", GPU_PLUGIN_GO, re.M))
    calls = re.findall(r'^\tflag\.(\w+)Var\(&[\w.]+, "([^"]+)", ([^,]+), "', GPU_PLUGIN_GO, re.M)
    registrations = re.findall(r"^\tflag\.(?!Parse\(\))", GPU_PLUGIN_GO, re.M)
    assert len(calls) == len(registrations), "a flag registration the pattern does not read"
    return [(name, GO_KINDS[go_type], _go_value(default, consts)) for go_type, name, default in calls]


# klog's flag.Value types (flagset.Var) have no default in the call: the zero value or init() gives it.
KLOG_VALUE_TYPES = {
    "verbosity": ("klog Level", None),            # init(): logging.setVState(0, nil, false)
    "stderrThreshold": ("klog severity", None),   # init(): logging.stderrThreshold = errorLog
    "vmodule": ("klog moduleSpec", ""),           # zero moduleSpec prints ""
    "traceLocation": ("klog traceLocation", ":0"),  # zero traceLocation prints "<file>:<line>" = ":0"
}
KLOG_SEVERITIES = {"infoLog": "0", "warningLog": "1", "errorLog": "2", "fatalLog": "3"}  # klog's severity order


def upstream_klog_flags() -> list[tuple[str, str, str]]:
    init = dict(re.findall(r"^\tlogging\.(\w+) = (\S+)", KLOG_GO, re.M))
    verbosity = re.search(r"logging\.setVState\((\d+),", KLOG_GO)
    assert verbosity, "klog.go: no logging.setVState call"
    init["verbosity"] = verbosity.group(1)
    init["stderrThreshold"] = KLOG_SEVERITIES[init["stderrThreshold"]]
    flags = []
    for go_type, field, name in re.findall(r'^\tflagset\.(\w*)Var\(&logging\.(\w+), "([^"]+)"', KLOG_GO, re.M):
        if go_type:
            flags.append((name, GO_KINDS[go_type], _go_value(init[field], {})))
        else:
            kind, zero = KLOG_VALUE_TYPES[field]
            flags.append((name, kind, init[field] if zero is None else zero))
    assert len(flags) == len(re.findall(r"^\tflagset\.", KLOG_GO, re.M)), "a klog registration the pattern misses"
    return flags


# --- the table against the vendored source ---------------------------------------------------------------------


def test_the_table_was_read_for_the_pinned_image_tag():
    assert PLUGIN_VERSION == f"v{INTEL_GPU_PLUGIN_TAG}", (
        f"model/images.py pins {INTEL_GPU_PLUGIN_TAG} but the flags table was read for {PLUGIN_VERSION}: re-read "
        "the release's flags (tests/fixtures/upstream/intel-gpu-plugin/flags/SOURCE.md, 'Refresh') and update "
        "model/plugin_flags.py")


def test_vendored_excerpts_match_the_hashes_in_their_source_note():
    note = (UPSTREAM / "SOURCE.md").read_text()
    for path in sorted(UPSTREAM.glob("*.excerpt")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        assert digest in note, f"{path.name}: sha256 {digest} not recorded in {UPSTREAM.name}/SOURCE.md"


def test_the_plugin_registers_klogs_flags_through_the_deviceplugin_package():
    assert "klog.InitFlags(nil)" in DEVICEPLUGIN_API_GO


def test_the_table_covers_every_flag_the_source_registers_in_registration_order():
    upstream = [name for name, _, _ in upstream_gpu_plugin_flags() + upstream_klog_flags()]
    table = [f.name for f in FLAGS]
    assert table == upstream, (f"missing from the table: {sorted(set(upstream) - set(table))}; "
                               f"not registered upstream: {sorted(set(table) - set(upstream))}")


@pytest.mark.parametrize("name,kind,default", upstream_gpu_plugin_flags() + upstream_klog_flags(),
                         ids=lambda v: v if isinstance(v, str) else None)
def test_each_flags_kind_and_default_are_the_sources(name, kind, default):
    f = FLAG_NAMED.get(name)
    assert f is not None
    assert (f.kind, f.default) == (kind, default)
    assert f.registered_by == ("klog" if f"\"{name}\"" in KLOG_GO else "gpu_plugin")


def test_the_known_source_facts_behind_the_reasons_are_in_the_excerpt():
    # The excerpt is the v0.37-era main(): xpumd and monitoring-mode exist, resource-manager is gone.
    names = [name for name, _, _ in upstream_gpu_plugin_flags()]
    assert {"xpumd-endpoint", "monitoring-mode", "health-management"} <= set(names)
    assert "resource-manager" not in names and "run-mode" not in names


# --- the table's own shape -------------------------------------------------------------------------------------


def test_the_table_is_immutable_data():
    assert isinstance(FLAGS, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        FLAGS[0].verdict = "allowed"  # type: ignore[misc]


def test_each_flag_is_listed_once_with_a_verdict_and_a_one_line_reason_and_description():
    assert len({f.name for f in FLAGS}) == len(FLAGS)
    for f in FLAGS:
        assert f.verdict in ("allowed", "refused")
        assert not f.name.startswith("-")
        for text in (f.reason, f.does):
            assert text.strip() and "\n" not in text and "|" not in text, f.name
        assert f.example == f"-{f.name}" or f.example.startswith(f"-{f.name}="), f.name


@pytest.mark.parametrize("name", ["health-management", "xpumd-endpoint", "shared-dev-num", "enable-monitoring",
                                  "monitoring-mode", "prefix", "wsl", "temp-limit", "gpu-temp-limit",
                                  "memory-temp-limit", "log_dir", "log_file"])
def test_flags_this_deployment_cannot_or_will_not_use_are_refused(name):
    assert flag(name).verdict == "refused"


def test_the_refusal_reasons_name_what_is_missing():
    assert "privileged" in flag("health-management").reason
    assert "#2278" in flag("health-management").reason
    assert "/run/xpumd" in flag("xpumd-endpoint").reason
    assert "sharedDevNum" in flag("shared-dev-num").reason
    assert "sharedDevNum" in flag("shared-dev-num").hint
    assert "every GPU" in flag("enable-monitoring").reason
    assert "/dev/dxg" in flag("wsl").reason
    assert "does not mount" in flag("prefix").reason


# --- check_plugin_args: refused and allowed flags ----------------------------------------------------------------


@pytest.mark.parametrize("f", REFUSED, ids=lambda f: f.name)
def test_every_refused_flag_is_refused_with_its_reason(f):
    (problem,) = check_plugin_args([f.example])
    assert problem == f"'{f.example}' is refused: {f.reason}; hint: {f.hint}"


@pytest.mark.parametrize("f", REFUSED, ids=lambda f: f.name)
def test_a_refused_flag_is_refused_in_every_spelling(f):
    for arg in (f"-{f.name}", f"--{f.name}", f"-{f.name}=true", f"-{f.name}=x", f"--{f.name}=1"):
        assert check_plugin_args([arg]) == [f"'{arg}' is refused: {f.reason}; hint: {f.hint}"]


@pytest.mark.parametrize("f", ALLOWED, ids=lambda f: f.name)
def test_every_allowed_flag_passes_in_its_valid_form(f):
    assert check_plugin_args([f.example]) == []
    assert check_plugin_args(["-" + f.example]) == [], "Go reads --name like -name"


@pytest.mark.parametrize("f", [f for f in ALLOWED if f.kind == "bool"], ids=lambda f: f.name)
def test_allowed_bool_flags_take_no_value_or_true(f):
    assert check_plugin_args([f"-{f.name}"]) == []
    assert check_plugin_args([f"-{f.name}=true"]) == []


@pytest.mark.parametrize("f", [f for f in ALLOWED if f.kind == "bool" and f.name != "logtostderr"],
                         ids=lambda f: f.name)
def test_allowed_bool_flags_take_false(f):
    assert check_plugin_args([f"-{f.name}=false"]) == []


@pytest.mark.parametrize("value", ["1", "0", "t", "TRUE", "yes", ""])
def test_a_bool_flag_takes_only_true_or_false(value):
    assert check_plugin_args([f"-skip_headers={value}"]) == [
        f"'-skip_headers={value}': -skip_headers takes true or false, not '{value}'; "
        "hint: write -skip_headers or -skip_headers=false"]


def test_all_allowed_flags_together_pass_except_allow_with_deny():
    args = [f.example for f in ALLOWED if f.name != "deny-ids"]
    assert check_plugin_args(args) == []


def test_the_shipped_valid_config_fixtures_extra_args_pass():
    yaml = YAML(typ="safe", pure=True)
    seen = 0
    for path in sorted((FIXTURES / "config" / "valid").glob("*.yaml")):
        plugin = (yaml.load(path.read_text()) or {}).get("config", {}).get("gpu-platform:intelGpuPlugin") or {}
        if plugin.get("extraArgs"):
            seen += 1
            assert check_plugin_args(plugin["extraArgs"]) == [], path.name
    assert seen


@pytest.mark.parametrize("fixture,name", [("health-management-arg.yaml", "health-management"),
                                          ("shared-dev-num-in-extra-args.yaml", "shared-dev-num")])
def test_the_invalid_config_fixtures_extra_args_are_refused_with_the_table_reason(fixture, name):
    config = YAML(typ="safe", pure=True).load((FIXTURES / "config" / "invalid" / fixture).read_text())
    (arg,) = config["config"]["gpu-platform:intelGpuPlugin"]["extraArgs"]
    f = flag(name)
    assert check_plugin_args([arg]) == [f"'{arg}' is refused: {f.reason}; hint: {f.hint}"]


# --- check_plugin_args: what is not a flag of the pinned binary ----------------------------------------------------


KLOG_2_140 = "klog v2.140.0 added it, and the pinned image's klog version is unverified; hint: remove it"
RESOURCE_MANAGER = ("fractional resource management was removed in v0.34.0 (release notes: 'Removal of resource "
                    "manager functionality'); it also needed GPU Aware Scheduling, NFD and a ServiceAccount with a "
                    "ClusterRole (overlays/fractional_resources), none of which this cluster runs; hint: remove it")


@pytest.mark.parametrize(("arg", "rest"), [
    ("-foo", f"{NOT_DEFINED}; {TABLE_HINT}"),
    ("-enable-monitor", f"{NOT_DEFINED}; hint: did you mean -enable-monitoring?"),
    ("-V=2", f"{NOT_DEFINED}; {TABLE_HINT}"),
    ("-log-dir=/x", f"{NOT_DEFINED}; hint: did you mean -log_dir?"),
    ("-resource-manager", f"is not a flag of gpu_plugin {PLUGIN_VERSION}: {RESOURCE_MANAGER}"),
    ("-run-mode=wsl", f"is not a flag of gpu_plugin {PLUGIN_VERSION}: -run-mode (wsl, vfio) exists only in PR #2219 "
                      "(KubeVirt support), closed unmerged; hint: remove it"),
    ("-legacy_stderr_threshold_behavior=false", f"is not a flag of gpu_plugin {PLUGIN_VERSION}: {KLOG_2_140}"),
    ("-alsologtostderrthreshold=ERROR", f"is not a flag of gpu_plugin {PLUGIN_VERSION}: {KLOG_2_140}"),
    ("-kubeconfig=/x", f"{NOT_DEFINED}; {TABLE_HINT}"),
])
def test_unknown_flags_are_refused_as_not_a_flag_of_the_pinned_release(arg, rest):
    assert check_plugin_args([arg]) == [f"'{arg}' {rest}"]
    assert PLUGIN_VERSION == "v0.37.0"


def test_an_unknown_flag_close_to_a_real_one_gets_a_suggestion():
    assert check_plugin_args(["-log-dir=/x"]) == [f"'-log-dir=/x' {NOT_DEFINED}; hint: did you mean -log_dir?"]
    assert check_plugin_args(["-allocation_policy=packed"]) == [
        f"'-allocation_policy=packed' {NOT_DEFINED}; hint: did you mean -allocation-policy?"]


@pytest.mark.parametrize("name", sorted(NOT_FLAGS))
def test_flags_of_other_releases_say_why_they_are_not_here(name):
    (problem,) = check_plugin_args([f"-{name}"])
    assert NOT_FLAGS[name] in problem
    assert FLAG_NAMED.get(name) is None


def test_resource_manager_names_its_removal_and_what_it_needed():
    assert check_plugin_args(["-resource-manager"]) == [
        f"'-resource-manager' is not a flag of gpu_plugin {PLUGIN_VERSION}: {RESOURCE_MANAGER}"]


@pytest.mark.parametrize("arg", ["-h", "-help", "--help"])
def test_help_is_refused_because_the_plugin_would_print_usage_and_exit(arg):
    assert check_plugin_args([arg]) == [
        f"'{arg}' is Go's built-in help: the plugin prints its usage and exits, so the pod restarts in a loop; "
        "hint: remove it"]


# --- check_plugin_args: Go flag syntax -----------------------------------------------------------------------------


@pytest.mark.parametrize("arg,expected", [
    ("v=2", "not a flag"),
    ("", "not a flag"),
    ("-", "not a flag"),
    ("--", "ends flag parsing"),
    ("---v=2", "bad flag syntax"),
    ("-=2", "bad flag syntax"),
    ("--=2", "bad flag syntax"),
])
def test_arguments_that_are_not_flags_are_refused(arg, expected):
    (problem,) = check_plugin_args([arg])
    assert expected in problem


def test_a_value_flag_without_equals_would_swallow_the_next_argument():
    assert check_plugin_args(["-allocation-policy", "packed"]) == [
        "'-allocation-policy' has no '=value': the plugin would take the next argument 'packed' as its value; "
        "hint: write -allocation-policy=<value> as one argument"]
    # Go takes even a flag-looking next argument as the value.
    assert check_plugin_args(["-v", "-skip_headers"]) == [
        "'-v' has no '=value': the plugin would take the next argument '-skip_headers' as its value; "
        "hint: write -v=<value> as one argument"]


def test_a_value_flag_last_without_a_value_makes_the_plugin_exit():
    assert check_plugin_args(["-skip_headers", "-v"]) == [
        "'-v' needs a value (the plugin exits: 'flag needs an argument'); hint: write -v=<value>"]


@pytest.mark.parametrize("arg", ["-allocation-policy=", "-vmodule=", "-allow-ids="])
def test_an_empty_value_is_refused(arg):
    name = arg[1:-1]
    assert check_plugin_args([arg]) == [
        f"'{arg}': -{name} has an empty value; hint: leave -{name} out to keep its default"]


def test_a_flag_given_twice_is_refused():
    assert check_plugin_args(["-v=2", "-v=4"]) == [
        "'-v=4': -v is given twice and the plugin keeps only the last; hint: give it once"]


def test_allow_ids_with_deny_ids_is_refused_as_the_plugin_exits_on_it():
    assert check_plugin_args(["-allow-ids=0x46a6", "-deny-ids=0x56a0"]) == [
        "'-allow-ids' with '-deny-ids': the plugin exits ('cannot use both allow-ids and deny-ids'); "
        "hint: keep one of them"]


def test_no_arguments_is_fine():
    assert check_plugin_args([]) == []


# --- check_plugin_args: values of allowed flags ------------------------------------------------------------------


@pytest.mark.parametrize("arg,expected", [
    ("-bypath=all", "'all' is refused"),
    ("-bypath=everything", "must be one of single, none"),
    ("-allocation-policy=random", "must be one of none, balanced, packed"),
    ("-allow-ids=0x46A6", "not a PCI device ID"),
    ("-allow-ids=46a6", "not a PCI device ID"),
    ("-deny-ids=0x46a6,", "not a PCI device ID"),
    ("-deny-ids=0x46a6,0x4680a", "not a PCI device ID"),
    ("-v=-1", "whole number from 0"),
    ("-v=two", "whole number from 0"),
    ("-v=2147483648", "whole number from 0"),
    ("-v=２", "whole number from 0"),
    ("-vmodule=gpu_plugin", "is not pattern=N"),
    ("-vmodule=gpu_plugin=-1", "is not pattern=N"),
    ("-vmodule==3", "is not pattern=N"),
    ("-vmodule=a=1,,b=2", "is not pattern=N"),
    ("-log_backtrace_at=gpu_plugin.go", "file.go:N"),
    ("-log_backtrace_at=gpu_plugin:12", "file.go:N"),
    ("-log_backtrace_at=gpu_plugin.go:0", "file.go:N"),
    ("-logtostderr=false", "klog exits"),
])
def test_bad_values_of_allowed_flags_are_refused_with_a_hint(arg, expected):
    (problem,) = check_plugin_args([arg])
    assert expected in problem


@pytest.mark.parametrize("arg", ["-bypath=single", "-bypath=none", "-allocation-policy=none",
                                 "-allocation-policy=balanced", "-allow-ids=0x46a6", "-deny-ids=0x56a0,0x56a1",
                                 "-v=0", "-v=10", "-vmodule=gpu_plugin*=4,server=2", "-log_backtrace_at=a.go:1"])
def test_good_values_of_allowed_flags_pass(arg):
    assert check_plugin_args([arg]) == []


# --- every problem line ------------------------------------------------------------------------------------------

HOSTILE = ["-health-management", "-foo", "x", "--", "-v", "-bypath=all", "-v=\n", "-\u202efoo", "-" + "a" * 500,
           "-allocation-policy=" + "p" * 500]


def test_every_problem_is_one_bounded_line_with_a_hint():
    for arg in HOSTILE + [f.example for f in REFUSED]:
        for problem in check_plugin_args([arg]):
            assert "\n" not in problem and "\u202e" not in problem, problem
            assert "; hint: " in problem, problem
            assert len(problem) < 600, problem


# --- the Markdown table ------------------------------------------------------------------------------------------


def test_the_markdown_renders_one_row_per_flag_in_table_order():
    lines = flags_table_markdown().splitlines()
    assert lines[0] == "| Flag | From | Kind | Default | What it does | Verdict | Reason |"
    assert lines[1] == "| --- | --- | --- | --- | --- | --- | --- |"
    rows = lines[2:]
    assert [row.split(" | ")[0] for row in rows] == [f"| `-{f.name}`" for f in FLAGS]
    for f, row in zip(FLAGS, rows, strict=True):
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]]
        assert len(cells) == 7, row
        assert cells[5] == f.verdict and cells[6] == f.reason and cells[4] == f.does


def test_the_markdown_shows_empty_defaults_as_empty_strings():
    row = next(r for r in flags_table_markdown().splitlines() if r.startswith("| `-prefix`"))
    assert '| `""` |' in row


def test_the_committed_flags_reference_shows_the_current_table_and_the_readme_links_it():
    from gitops.stack_schema import PLUGIN_FLAGS_REFERENCE, plugin_flags_reference

    text = PLUGIN_FLAGS_REFERENCE.read_text(encoding="utf-8")
    assert text == plugin_flags_reference() and flags_table_markdown() in text, "docs/plugin-flags.md: run make schema"
    assert "(docs/plugin-flags.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


# --- the exact problem lines -------------------------------------------------------------------------------------
# A user reads these lines in an export error: each names the argument, what the plugin would do and the fix.

EXACT_PROBLEMS = {
    "bypath-all": (["-bypath=all"],
                   "'-bypath=all': -bypath 'all' is refused: it bind-mounts the node's whole /dev/dri/by-path folder, "
                   "naming every GPU, into each GPU pod; hint: use single (the default) or none"),
    "bypath-unknown": (["-bypath=everything"],
                       "'-bypath=everything': -bypath must be one of single, none (the plugin silently treats it as "
                       "the default); hint: write one of single, none"),
    "policy-unknown": (["-allocation-policy=random"],
                       "'-allocation-policy=random': -allocation-policy must be one of none, balanced, packed (the "
                       "plugin exits on it); hint: write one of none, balanced, packed"),
    "pci-ids": (["-allow-ids=0x46A6,46a6,0x4680"],
                "'-allow-ids=0x46A6,46a6,0x4680': -allow-ids '0x46A6', '46a6' is not a PCI device ID of the form "
                "0x1234 (lowercase hex; the plugin exits on it); hint: write IDs like 0x46a6,0x4680, "
                "comma-separated, no spaces"),
    "level": (["-v=-1"],
              "'-v=-1': -v must be a whole number from 0 (klog parses it as int32); hint: e.g. -v=2; the plugin logs "
              "more at 1 to 5"),
    "vmodule": (["-vmodule=a=1,b"],
                "'-vmodule=a=1,b': -vmodule 'b' is not pattern=N (klog refuses it and the plugin exits); hint: e.g. "
                "-vmodule=gpu_plugin=4,server=2"),
    "trace": (["-log_backtrace_at=x"],
              "'-log_backtrace_at=x': -log_backtrace_at must be file.go:N with N above 0 (klog refuses anything "
              "else); hint: e.g. -log_backtrace_at=server.go:120"),
    "logtostderr-false": (["-logtostderr=false"],
                          "'-logtostderr=false': -logtostderr set to false makes klog write log files into the "
                          "read-only root filesystem, and klog exits when it cannot create them; hint: leave "
                          "-logtostderr out (true is the default)"),
    "bool-value": (["-skip_headers=1"],
                   "'-skip_headers=1': -skip_headers takes true or false, not '1'; hint: write -skip_headers or "
                   "-skip_headers=false"),
    "empty-value": (["-v="], "'-v=': -v has an empty value; hint: leave -v out to keep its default"),
    "help": (["-h"],
             "'-h' is Go's built-in help: the plugin prints its usage and exits, so the pod restarts in a loop; "
             "hint: remove it"),
    "other-release": (["-run-mode=vfio"],
                      "'-run-mode=vfio' is not a flag of gpu_plugin v0.37.0: -run-mode (wsl, vfio) exists only in "
                      "PR #2219 (KubeVirt support), closed unmerged; hint: remove it"),
    "close-to-known": (["-log-dir=/x"],
                       "'-log-dir=/x' is not a flag of gpu_plugin v0.37.0 (the plugin exits: 'flag provided but not "
                       "defined'); hint: did you mean -log_dir?"),
    "unknown": (["-zzzzqqq"],
                "'-zzzzqqq' is not a flag of gpu_plugin v0.37.0 (the plugin exits: 'flag provided but not "
                "defined'); hint: remove it; every flag of gpu_plugin v0.37.0 is listed in docs/plugin-flags.md"),
    "not-a-flag": (["x", "-v=2"],
                   "'x': not a flag: Go's flag parser stops at the first argument that is not a flag, and gpu_plugin "
                   "ignores it and every argument after it; hint: write each flag as -name or -name=value"),
    "dash": (["-"],
             "'-': not a flag: Go's flag parser stops at the first argument that is not a flag, and gpu_plugin "
             "ignores it and every argument after it; hint: write each flag as -name or -name=value"),
    "two-letters-no-dash": (["vv"],
                            "'vv': not a flag: Go's flag parser stops at the first argument that is not a flag, and "
                            "gpu_plugin ignores it and every argument after it; hint: write each flag as -name or "
                            "-name=value"),
    "double-dash": (["--"],
                    "'--': '--' ends flag parsing: gpu_plugin ignores every argument after it; hint: remove it"),
    "bad-syntax": (["---v"], "'---v': bad flag syntax (the plugin exits on it); hint: write -name or -name=value"),
    "swallows-next": (["-allocation-policy", "packed"],
                      "'-allocation-policy' has no '=value': the plugin would take the next argument 'packed' as its "
                      "value; hint: write -allocation-policy=<value> as one argument"),
    "needs-value": (["-v"], "'-v' needs a value (the plugin exits: 'flag needs an argument'); hint: write -v=<value>"),
    "twice": (["-v=2", "-v=3"], "'-v=3': -v is given twice and the plugin keeps only the last; hint: give it once"),
    "allow-and-deny": (["-allow-ids=0x46a6", "-deny-ids=0x56a0"],
                       "'-allow-ids' with '-deny-ids': the plugin exits ('cannot use both allow-ids and deny-ids'); "
                       "hint: keep one of them"),
    "refused": (["-shared-dev-num=2"],
                "'-shared-dev-num=2' is refused: set through the config key intelGpuPlugin.sharedDevNum, which "
                "requires sharedDevNumReason and exports the reason as an annotation on the DaemonSet; hint: set "
                "intelGpuPlugin.sharedDevNum and sharedDevNumReason instead"),
}


@pytest.mark.parametrize("case", sorted(EXACT_PROBLEMS))
def test_each_kind_of_problem_is_one_exact_line_naming_the_argument_and_the_fix(case):
    args, expected = EXACT_PROBLEMS[case]
    assert check_plugin_args(args) == [expected]


def test_a_long_argument_is_shown_cut_at_sixty_characters_and_one_of_sixty_whole():
    assert check_plugin_args(["-" + "a" * 60]) == ["'-" + "a" * 59 + f"…' {NOT_DEFINED}; {TABLE_HINT}"]
    assert check_plugin_args(["-" + "a" * 59]) == ["'-" + "a" * 59 + f"' {NOT_DEFINED}; {TABLE_HINT}"]


def test_a_control_character_in_an_argument_is_shown_escaped():
    assert check_plugin_args(["-v=\n"]) == [
        "'-v=\\n': -v must be a whole number from 0 (klog parses it as int32); hint: e.g. -v=2; the plugin logs more "
        "at 1 to 5"]


def test_after_a_problem_the_next_arguments_are_still_checked():
    assert [p.split("'")[1] for p in check_plugin_args(["-foo", "-v=x", "-v=2", "-bypath=all", "-h"])] == [
        "-foo", "-v=x", "-bypath=all", "-h"]


def test_a_flag_given_twice_is_counted_only_when_its_value_is_good():
    assert check_plugin_args(["-v=x", "-v=2"]) == [
        "'-v=x': -v must be a whole number from 0 (klog parses it as int32); hint: e.g. -v=2; the plugin logs more "
        "at 1 to 5"]
    assert check_plugin_args(["--v=2", "-v=2"]) == [
        "'-v=2': -v is given twice and the plugin keeps only the last; hint: give it once"]


def test_allow_ids_and_deny_ids_are_refused_together_only_when_both_are_given():
    assert check_plugin_args(["-allow-ids=0x46a6"]) == []
    assert check_plugin_args(["-deny-ids=0x46a6"]) == []


def test_a_value_swallowed_by_the_flag_before_it_is_not_judged_again():
    assert check_plugin_args(["-v", "-foo"]) == [
        "'-v' has no '=value': the plugin would take the next argument '-foo' as its value; "
        "hint: write -v=<value> as one argument"]


@pytest.mark.parametrize(("value", "ok"), [("0", True), ("2147483647", True), ("2147483648", False),
                                           ("-1", False), ("1.5", False), ("٣", False), ("", False)])
def test_klog_verbosity_is_an_int32_from_zero(value, ok):
    assert (check_plugin_args([f"-v={value}"]) == []) is ok


@pytest.mark.parametrize(("value", "ok"), [("a.go:1", True), ("dir/a.go:99", True), ("a.go:0", False),
                                           ("a.go:", False), ("a.go:1:2", False), ("ago:1", False),
                                           (":1", False), ("a.go", False), ("a.go:x", False)])
def test_a_backtrace_location_is_file_dot_go_colon_a_line_above_zero(value, ok):
    assert (check_plugin_args([f"-log_backtrace_at={value}"]) == []) is ok


@pytest.mark.parametrize(("value", "ok"), [("a=1", True), ("a*=0,b=2147483647", True), ("a=2147483648", False),
                                           ("a", False), ("=1", False), ("a=", False), ("a=1,", False)])
def test_vmodule_is_comma_separated_pattern_equals_level(value, ok):
    assert (check_plugin_args([f"-vmodule={value}"]) == []) is ok


@pytest.mark.parametrize(("kind", "value", "problem"), [
    ("int", "2147483647", None),
    ("int", "2147483648", "takes a whole number, not '2147483648'; hint: write -x=<number>"),
    ("int", "-1", "takes a whole number, not '-1'; hint: write -x=<number>"),
    ("uint64", "18446744073709551615", None),
    ("uint64", "18446744073709551616", "takes a whole number, not '18446744073709551616'; hint: write -x=<number>"),
    ("string", "2147483648", None),
])
def test_an_allowed_number_flag_would_take_only_a_whole_number_in_its_range(kind, value, problem):
    from model.plugin_flags import _value_problem

    spec = PluginFlag("x", "gpu_plugin", kind, "0", "does", "allowed", "reason", "-x=1")
    assert _value_problem(spec, value) == problem


def test_an_allowed_flag_without_a_value_check_takes_any_value():
    from model.plugin_flags import _value_problem

    spec = PluginFlag("x", "gpu_plugin", "string", "", "does", "allowed", "reason", "-x=a")
    assert _value_problem(spec, "anything") is None
    assert _value_problem(dataclasses.replace(spec, kind="bool"), "false") is None


def test_the_markdown_escapes_pipes_and_line_breaks_inside_a_cell():
    from model.plugin_flags import _cell

    assert _cell("a|b\nc") == "a\\|b c"


@pytest.mark.parametrize("first", ["x", "-foo", "-wsl", "-v=x", "-bypath=all"])
def test_every_kind_of_problem_still_lets_the_next_argument_be_checked(first):
    problems = check_plugin_args([first, "-zzzzqqq"])
    assert len(problems) == 2 and problems[1] == f"'-zzzzqqq' {NOT_DEFINED}; {TABLE_HINT}"


def test_a_swallowed_value_is_skipped_and_the_argument_after_it_is_checked():
    assert check_plugin_args(["-allocation-policy", "packed", "-zzzzqqq"]) == [
        "'-allocation-policy' has no '=value': the plugin would take the next argument 'packed' as its value; "
        "hint: write -allocation-policy=<value> as one argument",
        f"'-zzzzqqq' {NOT_DEFINED}; {TABLE_HINT}"]


def test_a_flag_name_may_start_with_any_letter_and_is_then_unknown_not_bad_syntax():
    assert check_plugin_args(["-Xv"]) == [f"'-Xv' {NOT_DEFINED}; hint: did you mean -v?"]


def test_printable_unicode_in_an_argument_is_shown_as_written():
    assert check_plugin_args(["-zürich"]) == [f"'-zürich' {NOT_DEFINED}; {TABLE_HINT}"]


def test_a_vmodule_item_with_two_equals_signs_is_refused_as_klog_refuses_it():
    assert check_plugin_args(["-vmodule=a=b=1"]) == [
        "'-vmodule=a=b=1': -vmodule 'a=b=1' is not pattern=N (klog refuses it and the plugin exits); "
        "hint: e.g. -vmodule=gpu_plugin=4,server=2"]


def test_a_refused_row_carries_its_fields_and_says_remove_it_unless_told_otherwise():
    from model.plugin_flags import _refused

    row = _refused("x", "klog", "int", "1", "does x", "why not", "-x=1")
    assert dataclasses.astuple(row) == ("x", "klog", "int", "1", "does x", "refused", "why not", "-x=1", "remove it",
                                        None)
    assert _refused("x", "klog", "int", "1", "does x", "why not", "-x=1", hint="use y").hint == "use y"


def test_an_allowed_row_carries_its_fields_and_its_value_check():
    from model.plugin_flags import _allowed, _level

    row = _allowed("v", "klog", "klog Level", "0", "verbosity", "logging only", "-v=1", check=_level)
    assert dataclasses.astuple(row) == ("v", "klog", "klog Level", "0", "verbosity", "allowed", "logging only",
                                        "-v=1", "remove it", _level)
    assert _allowed("v", "klog", "bool", "0", "d", "r", "-v").check is None


def test_a_choice_check_says_whether_the_plugin_exits_or_falls_back_to_the_default():
    from model.plugin_flags import _one_of

    assert _one_of("a", "b")("a") is None
    assert _one_of("a", "b")("c") == "must be one of a, b (the plugin exits on it); hint: write one of a, b"
    assert _one_of("a", "b", exits=False)("c") == (
        "must be one of a, b (the plugin silently treats it as the default); hint: write one of a, b")
