"""The image pins (model/images.py): the plugin's tag and digest in one place under a Renovate marker, the record of
known digests, and pin_problem's refusal of a tag changed without its digest."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conftest import EXAMPLE, FIXTURES, ROOT
from model.images import (
    INTEL_GPU_PLUGIN_DIGEST,
    INTEL_GPU_PLUGIN_REPOSITORY,
    INTEL_GPU_PLUGIN_TAG,
    RECORDED_DIGESTS,
    image_ref,
    pin_problem,
)

OTHER = "sha256:" + "2" * 64


def test_the_plugin_is_pinned_by_a_tag_without_v_and_a_full_digest_and_the_pin_is_recorded():
    # Renovate bumps the tag, so its shape is held here, not its value: Intel's image tags carry no `v`.
    assert INTEL_GPU_PLUGIN_REPOSITORY == "docker.io/intel/intel-gpu-plugin"
    assert re.fullmatch(r"\d+\.\d+\.\d+", INTEL_GPU_PLUGIN_TAG)
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", INTEL_GPU_PLUGIN_DIGEST)
    assert RECORDED_DIGESTS == {INTEL_GPU_PLUGIN_REPOSITORY: {INTEL_GPU_PLUGIN_TAG: INTEL_GPU_PLUGIN_DIGEST}}


def test_an_image_reference_keeps_the_tag_readable_beside_its_digest():
    assert image_ref("docker.io/a/b", "1.2") == "docker.io/a/b:1.2"
    assert image_ref("docker.io/a/b", "1.2", None) == "docker.io/a/b:1.2"
    assert image_ref("docker.io/a/b", "1.2", OTHER) == f"docker.io/a/b:1.2@{OTHER}"


@pytest.mark.parametrize(("repository", "tag", "digest"), [
    (INTEL_GPU_PLUGIN_REPOSITORY, INTEL_GPU_PLUGIN_TAG, INTEL_GPU_PLUGIN_DIGEST),  # the recorded pair
    (INTEL_GPU_PLUGIN_REPOSITORY, INTEL_GPU_PLUGIN_TAG, None),  # a tag alone: nothing to check
    (INTEL_GPU_PLUGIN_REPOSITORY, "0.0.1", OTHER),  # a new tag with a new digest: taken as written
    ("docker.io/other/image", INTEL_GPU_PLUGIN_TAG, OTHER),  # a repository without a record
    ("docker.io/other/image", "0.36.0", INTEL_GPU_PLUGIN_DIGEST),  # the digest is recorded for another repository
], ids=["recorded", "no-digest", "unrecorded-tag", "unrecorded-repository", "other-repository"])
def test_a_pin_the_record_does_not_contradict_is_accepted(repository, tag, digest):
    assert pin_problem(repository, tag, digest) is None


def test_a_recorded_tag_with_another_digest_is_refused_naming_the_recorded_one():
    assert pin_problem(INTEL_GPU_PLUGIN_REPOSITORY, INTEL_GPU_PLUGIN_TAG, OTHER) == (
        f"docker.io/intel/intel-gpu-plugin:{INTEL_GPU_PLUGIN_TAG} is recorded with digest {INTEL_GPU_PLUGIN_DIGEST}, "
        f"not {OTHER}; hint: use the recorded digest (model/images.py RECORDED_DIGESTS), or correct the record if the "
        "registry says otherwise")


def test_a_digest_recorded_for_another_tag_is_the_tag_changed_without_its_digest():
    assert pin_problem(INTEL_GPU_PLUGIN_REPOSITORY, "0.0.1", INTEL_GPU_PLUGIN_DIGEST) == (
        f"{INTEL_GPU_PLUGIN_DIGEST} is recorded for docker.io/intel/intel-gpu-plugin:{INTEL_GPU_PLUGIN_TAG}, not for "
        "tag 0.0.1: the tag was changed without its digest, and Kubernetes would keep pulling the old image; hint: "
        "update the digest with the tag (Renovate does both in one change)")


def test_a_digest_recorded_for_several_other_tags_names_them_all_sorted(monkeypatch):
    monkeypatch.setitem(RECORDED_DIGESTS, "docker.io/a/b", {"2.0": OTHER, "1.0": OTHER, "3.0": "sha256:" + "3" * 64})
    assert pin_problem("docker.io/a/b", "4.0", OTHER) == (
        f"{OTHER} is recorded for docker.io/a/b:1.0, 2.0, not for tag 4.0: the tag was changed without its digest, and "
        "Kubernetes would keep pulling the old image; hint: update the digest with the tag (Renovate does both in one "
        "change)")


def renovate_patterns() -> list[str]:
    """The custom managers' matchStrings from renovate.json5, as Python regexes (JavaScript writes (?<name>…))."""
    renovate = (ROOT / "renovate.json5").read_text()
    found = re.findall(r'matchStrings: \[\n\s+"(.*?)",\n', renovate)
    return [p.encode().decode("unicode_escape").replace("(?<", "(?P<") for p in found]


def test_the_plugin_tag_lives_in_exactly_one_place_with_a_renovate_marker():
    sources = []
    for folder, subfolders, names in os.walk(ROOT):
        # Pruned, not filtered after the walk: .venv and build/ (mutation copies of the project) hold most files.
        subfolders[:] = sorted(d for d in subfolders if d not in {".venv", "tests", "build", ".git", "node_modules"})
        sources += [Path(folder, n) for n in sorted(names) if Path(n).suffix in (".py", ".yaml", ".json5", ".toml",
                                                                                  ".cfg")]
    hits = [(p, i) for p in sources for i, line in enumerate(p.read_text().splitlines())
            if INTEL_GPU_PLUGIN_TAG in line]
    assert [(p.relative_to(ROOT).as_posix()) for p, _ in hits] == ["model/images.py"], hits
    lines = (ROOT / "model/images.py").read_text().splitlines()
    path, index = hits[0]
    assert lines[index - 1] == "# renovate: datasource=docker depName=docker.io/intel/intel-gpu-plugin"
    match = re.search(renovate_patterns()[0], "\n".join(lines[index - 1:index + 2]))
    assert match, "renovate.json5's plugin matchString does not match model/images.py"
    # One match takes the tag and its digest: a Renovate bump updates both in one change.
    assert match.group("currentValue", "currentDigest") == (INTEL_GPU_PLUGIN_TAG, INTEL_GPU_PLUGIN_DIGEST)


def test_renovate_takes_each_apps_tag_and_digest_from_the_stack_files_in_one_match():
    plex, app = renovate_patterns()[1:]
    text = "    imageTag: 1.42.2.10156-f737b826c\n    imageDigest: sha256:" + "a" * 64 + "\n"
    found = re.search(plex, text)
    assert found and found.group("currentValue", "currentDigest") == ("1.42.2.10156-f737b826c", "sha256:" + "a" * 64)
    found = re.search(plex, (EXAMPLE / "Pulumi.prod.yaml").read_text())
    assert found and found.group("currentValue") == "1.42.2.10156-f737b826c"
    jellyfin = (FIXTURES / "config" / "valid" / "plex-and-jellyfin.yaml").read_text()
    found = re.search(app, jellyfin)
    assert found
    assert (found.group("depName"), found.group("currentValue")) == ("docker.io/jellyfin/jellyfin", "10.10.7")
