"""The one place each container image is pinned. Renovate updates the tags through the inline markers below
(the custom manager in renovate.json5 reads them); everything else imports these names.

Intel publishes GitHub releases with a `v` (`vX.Y.Z`) but pushes image tags without it (`X.Y.Z`): the marker uses
the docker datasource so Renovate compares image tags, never release tags. A stack's optional `imageDigest`
(Pulumi.<stack>.yaml) belongs to this tag: update it in the same change (`--check` in CI shows both).
"""

# renovate: datasource=docker depName=docker.io/intel/intel-gpu-plugin
INTEL_GPU_PLUGIN_TAG = "0.37.0"
INTEL_GPU_PLUGIN_REPOSITORY = "docker.io/intel/intel-gpu-plugin"

# Plex's tag is per stack (`plex.imageTag` in Pulumi.<stack>.yaml) so dev can run ahead of prod.
PLEX_REPOSITORY = "docker.io/plexinc/pms-docker"


def image_ref(repository: str, tag: str, digest: str | None = None) -> str:
    """`repo:tag` or `repo:tag@sha256:…`; the tag stays readable in diffs even when the digest pins."""
    return f"{repository}:{tag}@{digest}" if digest else f"{repository}:{tag}"
