"""The one place the plugin's image is pinned, and the record of known digests every image pin is checked against.

Renovate updates each pin through the inline markers (the custom managers in renovate.json5 read them): a tag and its
digest sit on adjacent lines, captured by one match (`currentValue`, `currentDigest`), so one change updates both and a
tag bump cannot leave the old digest behind (Kubernetes pulls by digest: the cluster would silently keep the old
image). Plex's tag and digest are per stack (`plex.imageTag`, `plex.imageDigest` in Pulumi.<stack>.yaml; dev may run
ahead of prod), an app's in its `image`/`imageDigest`; Renovate reads those lines too. Intel's GitHub releases carry a
`v` (`vX.Y.Z`), its image tags do not (`X.Y.Z`): the marker uses the docker datasource, so Renovate compares image
tags, never release tags.
"""

from __future__ import annotations

# renovate: datasource=docker depName=docker.io/intel/intel-gpu-plugin
INTEL_GPU_PLUGIN_TAG = "0.37.0"
INTEL_GPU_PLUGIN_DIGEST = "sha256:7001200071db10587fc31184eedda4f5cf291efba737adf85a8c80539f7fa5e1"
INTEL_GPU_PLUGIN_REPOSITORY = "docker.io/intel/intel-gpu-plugin"

PLEX_REPOSITORY = "docker.io/plexinc/pms-docker"

# Digests this project has seen for a tag (repository -> tag -> digest): a pin whose digest is recorded here for
# another tag of the same image is the tag-bump-without-digest mistake, and is refused. Add a line when you pin a
# new tag by digest (the export also records nothing by itself: an unknown pair is taken as written).
RECORDED_DIGESTS: dict[str, dict[str, str]] = {
    INTEL_GPU_PLUGIN_REPOSITORY: {INTEL_GPU_PLUGIN_TAG: INTEL_GPU_PLUGIN_DIGEST},
}


def image_ref(repository: str, tag: str, digest: str | None = None) -> str:
    """`repo:tag` or `repo:tag@sha256:…`; the tag stays readable in diffs even when the digest pins."""
    return f"{repository}:{tag}@{digest}" if digest else f"{repository}:{tag}"


def pin_problem(repository: str, tag: str, digest: str | None) -> str | None:
    """Why `repository:tag@digest` cannot be right, from the record, or None."""
    if digest is None:
        return None
    known = RECORDED_DIGESTS.get(repository, {})
    if tag in known and known[tag] != digest:
        return (f"{repository}:{tag} is recorded with digest {known[tag]}, not {digest}; hint: use the recorded digest "
                "(model/images.py RECORDED_DIGESTS), or correct the record if the registry says otherwise")
    others = sorted(t for t, d in known.items() if d == digest and t != tag)
    if others:
        return (f"{digest} is recorded for {repository}:{', '.join(others)}, not for tag {tag}: the tag was changed "
                "without its digest, and Kubernetes would keep pulling the old image; hint: update the digest with "
                "the tag (Renovate does both in one change)")
    return None
