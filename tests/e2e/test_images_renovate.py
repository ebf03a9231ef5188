"""Renovate's own extraction judges the project's pins (issue 31). The project says Renovate keeps its images and
versions current: the plugin's tag and digest (model/images.py), Plex and the GPU apps per stack (the custom
managers of renovate.json5 read Pulumi.<stack>.yaml), the Go tools (tools/*/go.mod), the Python pins. Until now only
Python copies of the managers' regexes checked that (tests/gitops/test_export_trust.py); here Renovate itself, as
tools/renovate pins it (`make tools`: build/tools/bin/renovate, Node 24), runs offline with `--platform=local
--dry-run=extract` over a copy of the project and over an exported tree, and the tests read its JSON log: a pin the
project has that is missing from Renovate's extracted list, or a config Renovate rejects, fails. Run by `make e2e`.

The expected pins come from the project's own files (model/images.py, the stack files through the program's
config model, go.mod, requirements*.txt), never from copies here. Renovate exits 0 on a config it rejects and on a
failed lookup; `extract` reads success from the log (`--config-validation-error` makes a rejected config exit 1 too),
and a test breaks the config to prove a rejection is seen.

The exported tree is the user's GitOps repository: the export writes plain `image:` lines and no `# renovate:` marker,
so a repository on Renovate's defaults (or the user's own config, which turns the docker and kubernetes managers off
and reads markers only) tracks none of them there. They are tracked where they are pinned, in this project, and the
next export writes the bump; a test holds every exported image to a pin Renovate reads here. Renovate's kubernetes
manager, pointed at the exported YAML, would read each one correctly (another test), should a repository want that."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from builders import project_keys
from conftest import FIXTURES, ROOT, export, stack_text
from model.config import StackConfig, parse_stack_config
from model.images import (
    INTEL_GPU_PLUGIN_DIGEST,
    INTEL_GPU_PLUGIN_REPOSITORY,
    INTEL_GPU_PLUGIN_TAG,
    PLEX_REPOSITORY,
)

pytestmark = pytest.mark.e2e

TOOLS = ROOT / "build" / "tools"
RENOVATE = TOOLS / "bin" / "renovate"
NODE = TOOLS / "node24" / "nodejs" / "bin" / "node"
RENOVATE_DIST = TOOLS / "renovate" / "node_modules" / "renovate" / "dist"
# tools/renovate installs without re2 (its install script downloads); Renovate says so once and uses RegExp.
EXPECTED_WARNINGS = {"RE2 not usable, falling back to RegExp"}
# What Renovate logs about a repository config it migrates, warns about or rejects (config/migrate-validate.js,
# workers/repository/init/merge.js, workers/repository/error.js).
CONFIG_MESSAGES = {"Found renovate config errors", "Found renovate config warnings", "Config migration necessary",
                   "Static repo config validation issues detected", "Repository has invalid config"}
# A repository onboarded with Renovate's defaults: what the exported tree is judged under.
RECOMMENDED = {"extends": ["config:recommended"]}
# The plugin's versioning in renovate.json5: its image tags' own form (`0.37.0`), so a `v0.38.0` tag is no update.
TAG_FORM = r"regex:^(?<major>\d+)\.(?<minor>\d+)\.(?<patch>\d+)$"


@pytest.fixture(autouse=True, scope="module")
def _renovate_is_built() -> None:
    """A missing Renovate fails these tests (never skips them): `make e2e` builds it first."""
    if not RENOVATE.is_file():
        pytest.fail(f"{RENOVATE}: not built; hint: run `make tools` (make e2e does)")


# --- running Renovate and reading its log ----------------------------------------------------------------------

@dataclass(frozen=True)
class Dep:
    """One dependency in Renovate's "Extracted dependencies" line."""

    manager: str
    file: str
    name: str
    value: str | None
    digest: str | None
    datasource: str | None
    versioning: str | None
    dep_type: str | None
    # Extracted but not updated: a skipReason, or `enabled: false` (gomod's indirect requirements).
    updated: bool

    def shown(self) -> str:
        value = (self.value or "") + (f"@{self.digest}" if self.digest else "")
        return f"{self.manager} {self.file} {self.name} {value}" + ("" if self.updated else " (not updated)")


@dataclass
class Extraction:
    folder: Path
    returncode: int
    version: str | None = None
    deps: list[Dep] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    # Anything that means Renovate did not extract this folder with the config as written; empty when it did.
    problems: list[str] = field(default_factory=list)

    def find(self, manager: str, file: str, name: str) -> list[Dep]:
        return [d for d in self.deps if (d.manager, d.file, d.name) == (manager, file, name)]

    def one(self, manager: str, file: str, name: str) -> Dep:
        found = self.find(manager, file, name)
        assert len(found) == 1, f"{file}: {manager} extracted {len(found)} {name}, not 1; from that file it read: " + (
            ", ".join(d.shown() for d in self.deps if d.file == file) or "nothing")
        return found[0]


def extract(folder: Path, base_dir: Path) -> Extraction:
    """`renovate --platform=local --dry-run=extract` in `folder`, offline, its JSON log read. The repository config is
    the folder's own (renovate.json5 or renovate.json); RENOVATE_* from the environment is dropped (a
    RENOVATE_CONFIG_FILE naming that same file would extract everything twice)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RENOVATE_")}
    env.update(LOG_LEVEL="debug", LOG_FORMAT="json", RENOVATE_BASE_DIR=str(base_dir))
    proc = subprocess.run([str(RENOVATE), "--platform=local", "--dry-run=extract", "--config-validation-error=true"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    result = Extraction(folder, proc.returncode)
    problems = result.problems
    if proc.returncode:
        problems.append(f"renovate exited {proc.returncode}")
    problems += [f"stderr: {line}" for line in proc.stderr.splitlines() if line.strip()]
    extracted = 0
    for text in proc.stdout.splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            problems.append(f"not a JSON log line: {text[:200]}")
            continue
        msg = line.get("msg", "")
        if msg == "Renovate started":
            result.version = line.get("renovateVersion")
        elif msg == "Dependency extraction complete":
            result.stats = line.get("stats", {})
        elif msg == "Extracted dependencies":
            extracted += 1
            result.deps += _deps(line.get("packageFiles") or {})
        if msg == "Config migration necessary":
            problems.append(f"{msg}: the config uses option names Renovate has renamed; hint: run "
                            f"{RENOVATE_DIST / 'config-validator.js'} --strict with build/tools/node24/nodejs/bin/node")
        elif msg in CONFIG_MESSAGES:
            problems.append(f"{msg}: {json.dumps(_details(line))[:1500]}")
        elif line.get("level", 0) >= 40 and msg not in EXPECTED_WARNINGS:
            problems.append(f"level {line['level']}: {msg}: {json.dumps(_details(line))[:500]}")
        if msg == "Repository finished" and line.get("result") not in (None, "done"):
            problems.append(f"repository finished with result {line['result']!r}")
    if extracted != 1:
        problems.append(f"{extracted} 'Extracted dependencies' lines, not 1")
    return result


def _details(line: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in line.items() if k in ("errors", "warnings", "err", "configError", "result")}


def _deps(package_files: dict[str, list[dict[str, Any]]]) -> list[Dep]:
    return [Dep(manager, pf["packageFile"], d.get("depName", ""), d.get("currentValue"), d.get("currentDigest"),
                d.get("datasource"), d.get("versioning"), d.get("depType"),
                not d.get("skipReason") and d.get("enabled") is not False)
            for manager, files in package_files.items() for pf in files for d in pf["deps"]]


def clean(extraction: Extraction) -> Extraction:
    """The extraction, once it is certain Renovate accepted the config and read the folder."""
    assert not extraction.problems, f"{extraction.folder}: Renovate did not extract cleanly:\n" + "\n".join(
        extraction.problems)
    return extraction


# --- what the project pins, from its own files ----------------------------------------------------------------

def project_files() -> list[str]:
    """The project as a commit would hold it: tracked files and new ones git does not ignore (not .venv, build/)."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, check=True).stdout.decode()
    return sorted(p for p in set(out.split("\0")) if p and (ROOT / p).is_file())


def stack_configs(folder: Path) -> dict[str, StackConfig]:
    return {p.name: parse_stack_config(project_keys(p), p.name) for p in sorted(folder.glob("Pulumi.*.yaml"))}


def stack_images(folder: Path) -> list[tuple[str, str, str, str | None]]:
    """(stack file, repository, tag, digest) of Plex and every GPU app, as the program reads the stack files."""
    images = []
    for name, cfg in stack_configs(folder).items():
        # an adopted Plex (or none): the repository's release pins its image
        if cfg.plex is not None and cfg.plex.imageTag is not None:
            images.append((name, PLEX_REPOSITORY, cfg.plex.imageTag, cfg.plex.imageDigest))
        for app in cfg.apps:
            if app.image is None:
                continue
            repository, tag = app.image.rsplit(":", 1)
            images.append((name, repository, tag, app.imageDigest))
        if cfg.gpu.route == "dra" and cfg.gpu.dra.image:  # the DRA driver's pin (docs/dra.md)
            repository, tag = cfg.gpu.dra.image.rsplit(":", 1)
            images.append((name, repository, tag, cfg.gpu.dra.imageDigest))
    return images


def go_pins(go_mod: Path) -> list[tuple[str, str, str]]:
    """(depType, module, version) of what a go.mod pins itself: the go directive, the direct requirements and the
    versioned replacements (not `// indirect`: Go picks those, Renovate extracts them disabled)."""
    pins, block = [], None
    for raw in go_mod.read_text().splitlines():
        line = raw.split("//")[0].strip() if "// indirect" not in raw else ""
        if not line:
            continue
        if line.endswith("("):
            block = line[:-1].strip()
            continue
        if line == ")":
            block = None
            continue
        verb, _, rest = line.partition(" ") if block is None else (block, " ", line)
        words = rest.split()
        if verb == "go":
            pins.append(("golang", "go", words[0]))
        elif verb == "require":
            pins.append(("require", words[0], words[1]))
        elif verb == "replace" and "=>" in words and len(words) - words.index("=>") == 3:
            pins.append(("replace", words[-2], words[-1]))
    return pins


PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==(\S+)")


def pip_pins(path: Path) -> list[tuple[str, str]]:
    """(name, ==version) of each `name[extras]==version` line, as Renovate's pip_requirements reads them."""
    return [(m[1], f"=={m[3]}") for line in path.read_text().splitlines() if (m := PIN.match(line.strip()))]


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def exported_images(out: Path) -> list[tuple[str, str, str, str | None]]:
    """(file, repository, tag, digest) of every `image:` line the export wrote."""
    images = []
    for path in sorted(out.rglob("*.yaml")):
        for line in path.read_text().splitlines():
            if m := re.match(r"^\s*(?:-\s+)?image:\s*['\"]?([^'\"\s]+)", line):
                ref, _, digest = m[1].partition("@")
                repository, _, tag = ref.rpartition(":")
                images.append((path.relative_to(out).as_posix(), repository, tag, digest or None))
    return images


# --- the extractions (each Renovate run takes a few seconds) -------------------------------------------------

@pytest.fixture(scope="module")
def project_copy(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("renovate-project")
    for rel in project_files():
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, copy / rel)
    return copy


@pytest.fixture(scope="module")
def project(project_copy, tmp_path_factory) -> Extraction:
    return extract(project_copy, tmp_path_factory.mktemp("renovate-base"))


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("renovate-out")
    assert export(out, "dev", "prod") == 0
    assert exported_images(out), "the export wrote no image: line"
    return out


def extract_with(out: Path, config: dict[str, Any], tmp_path_factory) -> Extraction:
    folder = tmp_path_factory.mktemp("renovate-tree")
    shutil.copytree(out, folder, dirs_exist_ok=True)
    (folder / "renovate.json").write_text(json.dumps(config, indent=2) + "\n")
    return extract(folder, tmp_path_factory.mktemp("renovate-base"))


@pytest.fixture(scope="module")
def exported_defaults(exported, tmp_path_factory) -> Extraction:
    return extract_with(exported, RECOMMENDED, tmp_path_factory)


@pytest.fixture(scope="module")
def exported_kubernetes(exported, tmp_path_factory) -> Extraction:
    return extract_with(exported, {**RECOMMENDED, "kubernetes": {"managerFilePatterns": ["/\\.ya?ml$/"]}},
                        tmp_path_factory)


# --- the project --------------------------------------------------------------------------------------------

def test_renovate_as_tools_renovate_pins_it_accepts_the_config_and_extracts_the_project_offline(project,
                                                                                               record_property):
    clean(project)
    pinned = json.loads((ROOT / "tools/renovate/package.json").read_text())["dependencies"]["renovate"]
    assert project.version == pinned
    tracked = [d for d in project.deps if d.updated]
    managers = project.stats["managers"]
    not_updated = Counter(f"{d.manager} {d.dep_type}" for d in project.deps if not d.updated)
    record_property("figures", f"renovate {project.version}: {len(project.deps)} dependencies tracked in "
                    f"{project.stats['total']['fileCount']} files of the project ("
                    + ", ".join(f"{m} {s['depCount']} in {s['fileCount']}" for m, s in sorted(managers.items()))
                    + f"), {len(tracked)} of them updated (extracted, not updated: "
                    + (", ".join(f"{k} {n}" for k, n in sorted(not_updated.items())) or "none") + "):"
                    + "".join(f"\n  {d.shown()}" for d in tracked))
    print("\n".join(f"{d.manager} {d.name} {d.value}" for d in project.deps))


def test_renovate_reads_the_plugins_tag_in_the_image_tags_form_and_its_digest_from_docker_with_semver(project):
    """The seed's caveat: Intel's releases are `v0.37.0`, its image tags `0.37.0`. Renovate reads the tag as written
    next to the marker, compares the registry's image tags (datasource docker, not GitHub releases) with the
    versioning renovate.json5 names for it, and writes tag and digest back in one change."""
    dep = clean(project).one("regex", "model/images.py", INTEL_GPU_PLUGIN_REPOSITORY)
    assert (dep.value, dep.digest) == (INTEL_GPU_PLUGIN_TAG, INTEL_GPU_PLUGIN_DIGEST)
    assert dep.value and not dep.value.startswith("v")
    assert (dep.datasource, dep.versioning, dep.updated) == ("docker", TAG_FORM, True)


def test_the_plugins_versioning_takes_its_tag_and_refuses_a_v_tag_which_semver_would_take(project):
    """Renovate's own versioning code (the pinned release's), asked about the plugin's extracted tag and about a
    `v` form of the next one: semver (and docker, the datasource's default) reads `v0.38.0` as a version compatible
    with `0.37.0` and would write it as is; Renovate does not normalise the `v`. renovate.json5 gives the plugin a
    versioning in the image tags' own form, which refuses a `v` tag should one ever be pushed: the seed's caveat,
    answered by the config rather than by the registry's habits."""
    dep = clean(project).one("regex", "model/images.py", INTEL_GPU_PLUGIN_REPOSITORY)
    assert dep.value
    major, minor, _ = dep.value.split(".")
    v_next = f"v{major}.{int(minor) + 1}.0"
    question = {"module": (RENOVATE_DIST / "modules" / "versioning" / "index.js").as_uri(), "pinned": dep.value,
                "next": v_next, "versionings": {"plugin": dep.versioning, "semver": "semver"}}
    script = """
        const q = JSON.parse(process.argv[1]);
        const { get } = await import(q.module);
        const ask = (name) => { const api = get(name);
          return [api.isVersion(q.pinned), api.isVersion(q.next), api.isCompatible(q.next, q.pinned)]; };
        console.log(JSON.stringify(Object.fromEntries(Object.entries(q.versionings).map(([k, v]) => [k, ask(v)]))));
    """
    proc = subprocess.run([str(NODE), "--input-type=module", "-e", script, json.dumps(question)], capture_output=True,
                          text=True, check=True, env={**os.environ, "LOG_LEVEL": "fatal"}, timeout=120)
    answers = json.loads(proc.stdout.strip().splitlines()[-1])
    # [reads the pinned tag, reads the `v` tag, takes the `v` tag as an update of the pinned one]
    assert answers["plugin"] == [True, False, False], answers
    assert answers["semver"] == [True, True, True], answers


def test_renovate_reads_plex_and_every_gpu_apps_tag_and_digest_from_each_stack_file(project):
    """What the program reads from Pulumi.<stack>.yaml (model/config/): Plex's imageTag/imageDigest, each
    app's image/imageDigest (an app needs its `# renovate:` marker). The shipped stacks have no app today; the next
    test reads one."""
    expected = stack_images(ROOT)
    assert {"Pulumi.dev.yaml", "Pulumi.prod.yaml"} <= {name for name, *_ in expected}
    assert_read(clean(project), expected)


def test_renovate_reads_a_gpu_apps_marker_and_plexs_digest_as_the_readme_writes_them(tmp_path):
    """README's second app (tests/fixtures/config/valid/plex-and-jellyfin.yaml), with digests under Plex's tag and
    the app's image, as a stack file beside renovate.json5."""
    text = (FIXTURES / "config" / "valid" / "plex-and-jellyfin.yaml").read_text()
    for key, digit in (("image", "1"), ("imageTag", "2")):
        text, found = re.subn(rf"^( +){key}: \S+\n", lambda m, d=digit: f"{m[0]}{m[1]}imageDigest: sha256:{d * 64}\n",
                              text, count=1, flags=re.M)
        assert found, key
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy(ROOT / "renovate.json5", folder)
    (folder / "Pulumi.apps.yaml").write_text(text)
    expected = stack_images(folder)
    assert len(expected) == 2 and all(digest for *_, digest in expected), expected
    assert_read(clean(extract(folder, tmp_path / "base")), expected)


def test_renovate_reads_the_dra_driver_s_image_and_digest_as_docs_dra_writes_them(tmp_path):
    """gpu.route: dra names the driver's image and digest in the stack file under a `# renovate:` marker, the shape
    docs/dra.md shows: the GPU apps' manager reads both, so a bump moves the tag and the digest together."""
    from model.config import DRA_DRIVER_IMAGE

    repository = DRA_DRIVER_IMAGE.rsplit(":", 1)[0]
    section = (f"  gpu-platform:gpu:\n    route: dra\n    dra:\n"
               f"      # renovate: datasource=docker depName={repository}\n"
               f"      image: {DRA_DRIVER_IMAGE}\n      imageDigest: sha256:{'3' * 64}\n")
    assert "# renovate: datasource=docker depName=" + repository in (ROOT / "docs" / "dra.md").read_text()
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copy(ROOT / "renovate.json5", folder)
    (folder / "Pulumi.dra.yaml").write_text(stack_text("prod").replace("config:\n", "config:\n" + section, 1))
    expected = stack_images(folder)
    assert (("Pulumi.dra.yaml", repository, "v0.11.0", f"sha256:{'3' * 64}")) in expected, expected
    assert_read(clean(extract(folder, tmp_path / "base")), expected)


def test_the_new_stack_templates_plex_tag_is_read_as_the_stack_files_are(project):
    """templates/Pulumi.stack.yaml (`make new-stack`) pins Plex's tag as well: the Plex manager reads it beside the
    stack files, so a Renovate bump moves the template too and a new stack starts on the current tag."""
    template = "templates/Pulumi.stack.yaml"
    assert template in project_files()
    tag = re.search(r"^ +imageTag: (\S+)$", (ROOT / template).read_text(), re.M)
    assert tag
    assert [(d.value, d.datasource) for d in clean(project).find("regex", template, PLEX_REPOSITORY)] == [
        (tag[1], "docker")]


def assert_read(extraction: Extraction, expected: list[tuple[str, str, str, str | None]]) -> None:
    missing = []
    for file, repository, tag, digest in expected:
        found = [(d.value, d.digest, d.datasource) for d in extraction.find("regex", file, repository) if d.updated]
        if found != [(tag, digest, "docker")]:
            pin = f"{repository}:{tag}" + (f"@{digest}" if digest else "")
            missing.append(f"{file}: {pin}: Renovate read {found}")
    assert not missing, "\n".join(missing)


def test_renovate_reads_the_go_directive_direct_requirements_and_replacements_of_every_tools_go_mod(project):
    clean(project)
    expected = {(f, *pin) for f in project_files() if re.fullmatch(r"tools/[^/]+/go\.mod", f)
                for pin in go_pins(ROOT / f)}
    assert {f for f, *_ in expected} == {f for f in project_files() if re.fullmatch(r"tools/[^/]+/go\.mod", f)}
    read = {(d.file, d.dep_type, d.name, d.value) for d in project.deps if d.manager == "gomod" and d.updated}
    assert not expected - read, sorted(expected - read)
    flux = [d for d in project.deps if (d.file, d.name) == ("tools/flux/go.mod", "github.com/fluxcd/flux2/v2")]
    assert [d.dep_type for d in flux] == ["require"]


def test_renovate_reads_every_python_pin(project):
    """Every `name==version` of the requirements files (pip_requirements; `-r` and hashes as pip reads them) and the
    build backend pyproject.toml pins (pep621). tests/ is left out, as Renovate's config:recommended does."""
    clean(project)
    files = [f for f in project_files() if re.search(r"(^|/)[^/]*requirements[^/]*\.txt$", f)
             and not f.startswith("tests/")]
    assert {"requirements.txt", "requirements-dev.txt", "policy/requirements.txt"} <= set(files)
    expected = {("pip_requirements", f, *pin) for f in files for pin in pip_pins(ROOT / f)}
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    expected |= {("pep621", "pyproject.toml", m[1], f"=={m[3]}") for r in build if (m := PIN.match(r))}
    read = {(d.manager, d.file, d.name, d.value) for d in project.deps if d.updated}
    assert not expected - read, sorted(expected - read)


def test_the_pins_of_requirements_in_are_read_through_requirements_txt_at_the_same_version(project):
    """requirements.in (the input of `make lock`, which pins through `pip freeze`) is read by no Renovate manager:
    pip_requirements wants a .txt, and the pip-compile manager is not pip freeze. Each of its pins is tracked where
    the lock writes it, at the same version."""
    txt = {normalized(d.name): d.value for d in clean(project).deps
           if (d.manager, d.file) == ("pip_requirements", "requirements.txt")}
    pins = pip_pins(ROOT / "requirements.in")
    assert pins
    assert [(name, txt.get(normalized(name))) for name, _ in pins] == pins


def test_renovate_reads_its_own_pin_with_its_lock_file(project):
    dep = clean(project).one("npm", "tools/renovate/package.json", "renovate")
    assert dep.value == json.loads((ROOT / "tools/renovate/package.json").read_text())["dependencies"]["renovate"]
    assert dep.updated


# --- an exported tree --------------------------------------------------------------------------------------------

def test_every_image_the_export_writes_is_a_pin_renovate_reads_in_the_project(exported, project):
    """Tag and digest as written (`repo:tag@digest`) are one pin Renovate reads here (model/images.py, the
    stack files): its change, exported, is the change of the tree."""
    read = {(d.name, d.value, d.digest) for d in clean(project).deps if d.manager == "regex" and d.updated}
    assert [i for i in exported_images(exported) if tuple(i[1:]) not in read] == []


def test_renovate_on_its_recommended_config_extracts_no_image_from_an_exported_tree(exported, exported_defaults,
                                                                                     record_property):
    """Today's fact, not a wish: the export writes no `# renovate:` marker, the kubernetes manager has no default file
    pattern and the flux manager reads only gotk-components.yaml, so no image line there is tracked (as in the
    user's repository, whose renovate.json turns the docker and kubernetes managers off). That is where a bump would
    be wrong anyway: the next export would write the project's pin back."""
    images = exported_images(exported)
    deps = clean(exported_defaults).deps
    record_property("figures", f"renovate, exported tree (dev, prod): {len(images)} image lines, "
                    f"{len(deps)} dependencies extracted with config:recommended")
    assert [d.shown() for d in deps if d.datasource == "docker"] == []


def test_renovates_kubernetes_manager_pointed_at_an_exported_tree_reads_each_image_as_the_project_pins_it(
        exported, exported_kubernetes):
    """The form the export writes, `repository:tag@digest`, is one Renovate splits into tag and digest."""
    read = {(d.file, d.name, d.value, d.digest) for d in clean(exported_kubernetes).deps
            if (d.manager, d.datasource) == ("kubernetes", "docker")}
    assert set(exported_images(exported)) == read


# --- a broken config is seen ---------------------------------------------------------------------------------

BREAKS = {
    # the first custom manager (the plugin's) without its matchStrings: Renovate's validation refuses it
    "a custom manager without matchStrings": lambda text: re.sub(r"\n +matchStrings: \[\n.*?\n +\],", "", text,
                                                                 count=1, flags=re.S),
    # a file that is not JSON5 at all
    "a config cut in half": lambda text: text[:len(text) // 2],
}


@pytest.mark.parametrize("break_", BREAKS, ids=lambda b: b.replace(" ", "-"))
def test_a_config_renovate_rejects_is_seen_by_the_extraction(project_copy, tmp_path, break_):
    folder = tmp_path / "project"
    shutil.copytree(project_copy, folder)
    config = folder / "renovate.json5"
    text = config.read_text()
    broken = BREAKS[break_](text)
    assert broken != text
    config.write_text(broken)
    extraction = extract(folder, tmp_path / "base")
    assert any(p.startswith("Repository has invalid config: ") for p in extraction.problems), extraction.problems
    assert extraction.returncode != 0 and not extraction.deps
    with pytest.raises(AssertionError, match="Renovate did not extract cleanly"):
        clean(extraction)


def test_a_config_renovate_has_to_migrate_is_seen_by_the_extraction(project_copy, tmp_path):
    """Renovate migrates an option it has renamed (`fileMatch`, now `managerFilePatterns`) and extracts as before,
    exit 0: the migration is the only sign, and it fails the extraction too."""
    folder = tmp_path / "project"
    shutil.copytree(project_copy, folder)
    config = folder / "renovate.json5"
    text = config.read_text()
    old = re.search(r'managerFilePatterns: \["/(.*?)/"\]', text)
    assert old
    config.write_text(text[:old.start()] + f'fileMatch: ["{old[1]}"]' + text[old.end():])
    extraction = extract(folder, tmp_path / "base")
    assert [p.split(":")[0] for p in extraction.problems] == ["Config migration necessary"]
    assert extraction.deps
    with pytest.raises(AssertionError, match="Renovate did not extract cleanly"):
        clean(extraction)
