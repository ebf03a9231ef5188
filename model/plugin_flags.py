"""Every command-line flag of the pinned gpu_plugin, with this deployment's verdict on it, and the check of
`intelGpuPlugin.extraArgs` against that table.

A flag is `allowed` only when it works with the DaemonSet as it is (components/intel_gpu_plugin.py: not privileged,
read-only root filesystem, `/dev/dri` and `/sys/class/drm` read-only, `/var/run/cdi` and kubelet's device-plugins
folder, nothing else, no sidecar) and does not widen what a GPU pod gets; else `refused` with its reason. A flag the
plugin does not register is refused too: Go's flag parser exits on it and the DaemonSet would crash-loop on every node.
The table is `TABLE_RELEASE`'s, from gpu_plugin.go's `main()` and klog's `InitFlags()`; reasons cite upstream's
overlays, cmd/gpu_plugin/README.md, issue #2278. Versions read, caveats (PR #2318's unreadable flag, klog v2.140.0's
two: refused as unknown), the refresh steps: tests/fixtures/upstream/intel-gpu-plugin/flags/SOURCE.md."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

# The release this table was read for. Written as numbers because the image tag itself is pinned in one place only
# (model/images.py); tests/model/test_plugin_flags.py fails when the two differ, so a tag bump re-reads the
# flags.
TABLE_RELEASE = (0, 37, 0)
PLUGIN_VERSION = "v" + ".".join(map(str, TABLE_RELEASE))

Kind = Literal["bool", "int", "uint64", "string", "klog Level", "klog severity", "klog moduleSpec",
               "klog traceLocation"]
Verdict = Literal["allowed", "refused"]
RegisteredBy = Literal["gpu_plugin", "klog"]

INT32_MAX = 2**31 - 1
# The DaemonSet's logs go to stderr only: the root filesystem is read-only and no log volume is mounted.
_NO_FILE_LOGS = ("no effect while logs go to stderr (-logtostderr stays true); file logging needs a writable "
                 "folder, and the container's root filesystem is read-only with no log volume")
_LEVEL_ZERO_ONLY = ("only read by the Level-Zero health check of -health-management, which is refused "
                    "(with -xpumd-endpoint the plugin exits on it)")


# Value checks of allowed flags: None when the value is fine, else the problem and its hint.
ValueCheck = Callable[[str], str | None]


def _one_of(*choices: str, exits: bool = True) -> ValueCheck:
    def check(value: str) -> str | None:
        if value in choices:
            return None
        effect = "the plugin exits on it" if exits else "the plugin silently treats it as the default"
        return f"must be one of {', '.join(choices)} ({effect}); hint: write one of {', '.join(choices)}"
    return check


def _bypath(value: str) -> str | None:
    if value == "all":
        return ("'all' is refused: it bind-mounts the node's whole /dev/dri/by-path folder, naming every GPU, into "
                "each GPU pod; hint: use single (the default) or none")
    return _one_of("single", "none", exits=False)(value)


_PCI_DEVICE_ID = re.compile(r"^0x[0-9a-f]{4}$")  # upstream validatePCIDeviceIDs


def _pci_ids(value: str) -> str | None:
    bad = [item for item in value.split(",") if not _PCI_DEVICE_ID.match(item)]
    if bad:
        return (f"{', '.join(repr(b) for b in bad)} is not a PCI device ID of the form 0x1234 (lowercase hex; the "
                "plugin exits on it); hint: write IDs like 0x46a6,0x4680, comma-separated, no spaces")
    return None


def _decimal(value: str, maximum: int = INT32_MAX) -> bool:
    return value.isascii() and value.isdigit() and int(value) <= maximum


def _level(value: str) -> str | None:
    if _decimal(value):
        return None
    return "must be a whole number from 0 (klog parses it as int32); hint: e.g. -v=2; the plugin logs more at 1 to 5"


def _vmodule(value: str) -> str | None:
    for item in value.split(","):
        pattern, eq, level = item.partition("=")
        if not (pattern and eq and _decimal(level)):
            return (f"{item!r} is not pattern=N (klog refuses it and the plugin exits); "
                    "hint: e.g. -vmodule=gpu_plugin=4,server=2")
    return None


def _trace_location(value: str) -> str | None:
    file, colon, line = value.partition(":")
    if colon and "." in file and ":" not in line and _decimal(line) and int(line) > 0:
        return None
    return "must be file.go:N with N above 0 (klog refuses anything else); hint: e.g. -log_backtrace_at=server.go:120"


def _only_true(value: str) -> str | None:
    if value == "true":
        return None
    return ("set to false makes klog write log files into the read-only root filesystem, and klog exits when it "
            "cannot create them; hint: leave -logtostderr out (true is the default)")


@dataclass(frozen=True)
class PluginFlag:
    """One flag the plugin binary registers, as `-h` would list it, and what this deployment makes of it."""

    name: str                 # without the dash
    registered_by: RegisteredBy
    kind: Kind
    default: str              # as Go's flag package prints it (DefValue)
    does: str                 # one line, from the usage string / README
    verdict: Verdict
    reason: str               # one line: why allowed, or why refused (refusal messages quote it)
    example: str              # a syntactically valid argument (what the tests feed in)
    hint: str = "remove it"   # what to do instead, for refused flags
    check: ValueCheck | None = field(default=None, compare=False, repr=False)

    @property
    def takes_value(self) -> bool:
        return self.kind != "bool"


def _refused(name: str, by: RegisteredBy, kind: Kind, default: str, does: str, reason: str, example: str,
             hint: str = "remove it") -> PluginFlag:
    return PluginFlag(name, by, kind, default, does, "refused", reason, example, hint)


def _allowed(name: str, by: RegisteredBy, kind: Kind, default: str, does: str, reason: str, example: str,
             check: ValueCheck | None = None) -> PluginFlag:
    return PluginFlag(name, by, kind, default, does, "allowed", reason, example, check=check)


# In registration order: gpu_plugin's main(), then klog's InitFlags().
FLAGS: tuple[PluginFlag, ...] = (
    _refused("prefix", "gpu_plugin", "string", "",
             "Prefix for the /sys and /dev paths the plugin scans and hands out",
             "makes the plugin scan <prefix>/sys and <prefix>/dev, which this DaemonSet does not mount (it mounts "
             "/dev/dri and /sys/class/drm at their own paths); upstream uses it only for fake devices "
             "(overlays/fake_devices)", "-prefix=/tmp/fakedev"),
    _refused("enable-monitoring", "gpu_plugin", "bool", "false",
             "Registers a monitoring resource that holds every GPU on the node (and its MEI devices)",
             "one pod requesting the monitoring resource gets every GPU device node on the node (plus /dev/mei*, "
             "which the plugin cannot check exists), outside the per-GPU count the scheduler sees; this product "
             "runs no GPU monitoring agent", "-enable-monitoring"),
    _refused("monitoring-mode", "gpu_plugin", "string", "single",
             "single: one gpu.intel.com/monitoring resource; split: i915_monitoring / xe_monitoring",
             "only read with -enable-monitoring, which is refused", "-monitoring-mode=split"),
    _refused("health-management", "gpu_plugin", "bool", "false",
             "Marks GPUs unhealthy from Level-Zero health data served by the intel-gpu-levelzero sidecar",
             "needs the intel-gpu-levelzero sidecar, which opens the GPU itself and so runs privileged upstream "
             "(overlays/levelzero; issue #2278); this DaemonSet is deliberately not privileged and has no sidecar "
             "or Level-Zero socket volume", "-health-management"),
    _refused("xpumd-endpoint", "gpu_plugin", "string", "",
             "Unix socket of xpumd to take GPU health from instead of Level-Zero",
             "needs xpumd running on every node and its socket folder mounted (upstream mounts host /run/xpumd, "
             "overlays/xpumd); this DaemonSet mounts neither, so no health data would arrive",
             "-xpumd-endpoint=/run/xpumd/intelxpuinfo.sock"),
    _allowed("bypath", "gpu_plugin", "string", "single",
             "How /dev/dri/by-path symlinks reach GPU pods: single (each GPU's own), none, all (whole folder)",
             "read from the /dev/dri mount the DaemonSet has; single or none only: all bind-mounts the node's "
             "whole by-path folder, naming every GPU, into each GPU pod", "-bypath=none", check=_bypath),
    _refused("wsl", "gpu_plugin", "bool", "false",
             "Windows Subsystem for Linux mode: hands out /dev/dxg found through Level-Zero",
             "needs /dev/dxg, /usr/lib/wsl and the Level-Zero sidecar (overlays/wsl), none of which this "
             "DaemonSet mounts; the nodes are Linux hosts with /dev/dri", "-wsl"),
    _refused("shared-dev-num", "gpu_plugin", "int", "1",
             "Number of containers that can share one GPU",
             "set through the config key intelGpuPlugin.sharedDevNum, which requires sharedDevNumReason and "
             "exports the reason as an annotation on the DaemonSet", "-shared-dev-num=2",
             hint="set intelGpuPlugin.sharedDevNum and sharedDevNumReason instead"),
    _refused("temp-limit", "gpu_plugin", "int", "100",
             "Global temperature (C) at which a GPU is marked unhealthy", _LEVEL_ZERO_ONLY, "-temp-limit=90"),
    _refused("gpu-temp-limit", "gpu_plugin", "int", "100",
             "GPU temperature (C) at which a GPU is marked unhealthy", _LEVEL_ZERO_ONLY, "-gpu-temp-limit=90"),
    _refused("memory-temp-limit", "gpu_plugin", "int", "100",
             "Memory temperature (C) at which a GPU is marked unhealthy", _LEVEL_ZERO_ONLY, "-memory-temp-limit=90"),
    _allowed("allocation-policy", "gpu_plugin", "string", "none",
             "Which device IDs kubelet is offered first: none, balanced (spread) or packed (fill one GPU first)",
             "only orders the devices the plugin already advertises; matters only with sharedDevNum above 1 or "
             "several GPUs", "-allocation-policy=packed", check=_one_of("none", "balanced", "packed")),
    _allowed("allow-ids", "gpu_plugin", "string", "",
             "Comma-separated PCI device IDs that alone may be registered (not with -deny-ids)",
             "only narrows which GPUs are advertised, read from the mounted /sys/class/drm",
             "-allow-ids=0x46a6,0x4680", check=_pci_ids),
    _allowed("deny-ids", "gpu_plugin", "string", "",
             "Comma-separated PCI device IDs never registered (not with -allow-ids)",
             "only narrows which GPUs are advertised, read from the mounted /sys/class/drm",
             "-deny-ids=0x56a0", check=_pci_ids),
    _refused("log_dir", "klog", "string", "", "Folder for log files", _NO_FILE_LOGS, "-log_dir=/var/log/gpu"),
    _refused("log_file", "klog", "string", "", "Single log file", _NO_FILE_LOGS, "-log_file=/var/log/gpu.log"),
    _refused("log_file_max_size", "klog", "uint64", "1800", "Largest log file, in MB (0: unlimited)",
             _NO_FILE_LOGS, "-log_file_max_size=100"),
    _allowed("logtostderr", "klog", "bool", "true", "Log to standard error instead of files",
             "true only, which is the default: false makes klog write files into the read-only root filesystem "
             "and exit when it cannot", "-logtostderr=true", check=_only_true),
    _refused("alsologtostderr", "klog", "bool", "false", "Log to standard error as well as files",
             "no effect while -logtostderr is true, its only allowed value", "-alsologtostderr"),
    _allowed("v", "klog", "klog Level", "0", "Log verbosity",
             "logging only; the plugin logs more at 1 to 5", "-v=4", check=_level),
    _allowed("add_dir_header", "klog", "bool", "false", "Add the source file's folder to each log line's header",
             "log line format only", "-add_dir_header"),
    _allowed("skip_headers", "klog", "bool", "false", "Leave out the header of each log line",
             "log line format only", "-skip_headers=true"),
    _refused("one_output", "klog", "bool", "false", "Write each log line only to its own severity's file",
             "only affects log files: " + _NO_FILE_LOGS, "-one_output"),
    _refused("skip_log_headers", "klog", "bool", "false", "Leave out the header when opening log files",
             "only affects log files: " + _NO_FILE_LOGS, "-skip_log_headers"),
    _refused("stderrthreshold", "klog", "klog severity", "2", "Lines at or above this severity also go to stderr",
             "no effect while -logtostderr is true, its only allowed value (klog's help: 'no effect when "
             "-logtostderr=true')",
             "-stderrthreshold=WARNING"),
    _allowed("vmodule", "klog", "klog moduleSpec", "", "Per-file verbosity: comma-separated pattern=N",
             "logging only", "-vmodule=gpu_plugin=5", check=_vmodule),
    _allowed("log_backtrace_at", "klog", "klog traceLocation", ":0",
             "Emit a stack trace when logging hits file.go:N",
             "debugging aid, logging only", "-log_backtrace_at=gpu_plugin.go:400", check=_trace_location),
)

_BY_NAME = {f.name: f for f in FLAGS}

# Names people may reach for that the pinned binary does not register: a precise reason beats "unknown".
NOT_FLAGS: dict[str, str] = {
    "resource-manager": "fractional resource management was removed in v0.34.0 (release notes: 'Removal of resource "
                        "manager functionality'); it also needed GPU Aware Scheduling, NFD and a ServiceAccount with "
                        "a ClusterRole (overlays/fractional_resources), none of which this cluster runs",
    "run-mode": "-run-mode (wsl, vfio) exists only in PR #2219 (KubeVirt support), closed unmerged",
    "legacy_stderr_threshold_behavior": "klog v2.140.0 added it, and the pinned image's klog version is unverified",
    "alsologtostderrthreshold": "klog v2.140.0 added it, and the pinned image's klog version is unverified",
}
# Go's flag package answers these itself: usage text, then exit.
_HELP = ("h", "help")


def _shown(arg: str, limit: int = 60) -> str:
    text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in arg)
    return f"'{text[:limit]}…'" if len(text) > limit else f"'{text}'"


def _split(arg: str) -> tuple[str, str | None] | str:
    """Go's flag.FlagSet.parseOne on one argument: (name, value or None), or the problem (a str)."""
    if len(arg) < 2 or not arg.startswith("-"):
        return ("not a flag: Go's flag parser stops at the first argument that is not a flag, and gpu_plugin "
                "ignores it and every argument after it; hint: write each flag as -name or -name=value")
    if arg == "--":
        return "'--' ends flag parsing: gpu_plugin ignores every argument after it; hint: remove it"
    name = arg[2:] if arg.startswith("--") else arg[1:]
    if not name or name[0] in "-=":
        return "bad flag syntax (the plugin exits on it); hint: write -name or -name=value"
    name, eq, value = name.partition("=")
    return name, (value if eq else None)


def _unknown(arg: str, name: str) -> str:
    if name in _HELP:
        return (f"{_shown(arg)} is Go's built-in help: the plugin prints its usage and exits, so the pod restarts in "
                "a loop; hint: remove it")
    if name in NOT_FLAGS:
        return f"{_shown(arg)} is not a flag of gpu_plugin {PLUGIN_VERSION}: {NOT_FLAGS[name]}; hint: remove it"
    close = difflib.get_close_matches(name, list(_BY_NAME), n=1)
    # The hint speaks to the stack file's author: what to change there, and where the flags are documented.
    hint = (f"did you mean -{close[0]}?" if close
            else f"remove it; every flag of gpu_plugin {PLUGIN_VERSION} is listed in docs/plugin-flags.md")
    return (f"{_shown(arg)} is not a flag of gpu_plugin {PLUGIN_VERSION} (the plugin exits: 'flag provided but not "
            f"defined'); hint: {hint}")


def _value_problem(spec: PluginFlag, value: str) -> str | None:
    if spec.kind == "bool":
        if value not in ("true", "false"):
            return f"takes true or false, not {_shown(value)}; hint: write -{spec.name} or -{spec.name}=false"
        return spec.check(value) if spec.check else None
    if value == "":
        return f"has an empty value; hint: leave -{spec.name} out to keep its default"
    if spec.kind in ("int", "uint64") and not _decimal(value, 2**64 - 1 if spec.kind == "uint64" else INT32_MAX):
        return f"takes a whole number, not {_shown(value)}; hint: write -{spec.name}=<number>"
    return spec.check(value) if spec.check else None


def check_plugin_args(args: Sequence[str]) -> list[str]:
    """Problems with arguments for gpu_plugin, one line each (empty: every argument is allowed as written).

    Parses like Go's `flag` package (`-name`, `--name`, `-name=value`; a non-bool flag without `=value` takes the
    next argument), then applies this deployment's verdicts: unknown and refused flags are refused with their
    reason, values are checked the way the plugin or klog would, and a flag given twice or `-allow-ids` together with
    `-deny-ids` is refused."""
    problems: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        parsed = _split(arg)
        if isinstance(parsed, str):
            problems.append(f"{_shown(arg)}: {parsed}")
            continue
        name, value = parsed
        spec = _BY_NAME.get(name)
        if spec is None:
            problems.append(_unknown(arg, name))
            continue
        if spec.verdict == "refused":
            problems.append(f"{_shown(arg)} is refused: {spec.reason}; hint: {spec.hint}")
            continue
        if spec.takes_value and value is None:
            if i < len(args):
                problems.append(f"{_shown(arg)} has no '=value': the plugin would take the next argument "
                                f"{_shown(args[i])} as its value; hint: write -{name}=<value> as one argument")
                i += 1  # Go consumes it as the value; judging it as a flag too would say the same thing twice
            else:
                problems.append(f"{_shown(arg)} needs a value (the plugin exits: 'flag needs an argument'); "
                                f"hint: write -{name}=<value>")
            continue
        problem = _value_problem(spec, value) if value is not None else None
        if problem:
            problems.append(f"{_shown(arg)}: -{name} {problem}")
            continue
        if name in seen:
            problems.append(f"{_shown(arg)}: -{name} is given twice and the plugin keeps only the last; "
                            "hint: give it once")
        seen.add(name)
    if {"allow-ids", "deny-ids"} <= seen:
        problems.append("'-allow-ids' with '-deny-ids': the plugin exits ('cannot use both allow-ids and deny-ids'); "
                        "hint: keep one of them")
    return problems


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def flags_table_markdown() -> str:
    """The table as Markdown for docs/plugin-flags.md (`make schema`): one row per flag, in registration order."""
    lines = [
        "| Flag | From | Kind | Default | What it does | Verdict | Reason |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for f in FLAGS:
        default = f"`{f.default}`" if f.default else '`""`'
        lines.append(f"| `-{f.name}` | {f.registered_by} | {f.kind} | {default} | {_cell(f.does)} | {f.verdict} "
                     f"| {_cell(f.reason)} |")
    return "\n".join(lines) + "\n"
