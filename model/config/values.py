"""The shapes a stack value may take: the project's patterns and the typed values every section is built from.

A pattern a refusal names is explained in PATTERN_MEANING; a value the export writes into its YAML carries the
value-length rule (line_width.py).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from model.config.line_width import EXPORT_VALUE_PREFIX, fits_export_line
from model.images import PLEX_REPOSITORY

PROJECT = "gpu-platform"

# Flux's own duration pattern (kustomize-controller v1 CRD, `interval`, `timeout`, `retryInterval`).
FLUX_DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
# Flux postBuild variable names (kustomize-controller docs): shell-style, no dashes, no dots.
FLUX_VAR_NAME_PATTERN = r"^[_a-zA-Z][_a-zA-Z0-9]*$"
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# An optional DNS-subdomain prefix and '/', then the name part (at most 63 characters).
LABEL_KEY = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
             r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"


def _no_latest(tag: str) -> str:
    if tag == "latest":
        raise ValueError("the tag 'latest' is not a pin; hint: use an exact version tag")
    return tag


NodeName = Annotated[str, StringConstraints(pattern=DNS1123_SUBDOMAIN, max_length=253)]
Dns1123Label = Annotated[str, StringConstraints(pattern=DNS1123_LABEL)]
FluxDuration = Annotated[str, StringConstraints(pattern=FLUX_DURATION_PATTERN), fits_export_line()]
RepoPath = Annotated[str, StringConstraints(pattern=r"^\./([A-Za-z0-9._-]+/)*[A-Za-z0-9._-]+$"), fits_export_line()]
FluxVarName = Annotated[str, StringConstraints(pattern=FLUX_VAR_NAME_PATTERN)]
LabelValue = Annotated[str, StringConstraints(pattern=LABEL_VALUE)]
# A label key is written with its value (a label value, at most 63) as `key: value`.
LabelKey = Annotated[str, StringConstraints(pattern=LABEL_KEY, max_length=316),
                     fits_export_line(extra=len(": ") + 63, what=" with ': ' and a 63-character label value")]
# An image reference is written behind the container's `        image: `, a shorter key than the rule's longest: it
# may use the difference. A digest may always follow the tag, so the bound counts one.
_IMAGE_KEY_SAVING = EXPORT_VALUE_PREFIX - len("        image: ")
_DIGEST_SUFFIX = "@sha256:" + "0" * 64
# Plex's tag is written after its repository: `image: docker.io/plexinc/pms-docker:<tag>[@sha256:…]`.
ImageTag = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"), AfterValidator(_no_latest),
                     fits_export_line(prefix=f"{PLEX_REPOSITORY}:", suffix=_DIGEST_SUFFIX, extra=-_IMAGE_KEY_SAVING,
                                      what=f" as '{PLEX_REPOSITORY}:<tag>@<digest>'")]
Sha256Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
Quantity = Annotated[str, StringConstraints(pattern=r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$"),
                     fits_export_line()]
_OCTET = r"(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])"
IPv4 = Annotated[str, StringConstraints(pattern=rf"^({_OCTET}\.){{3}}{_OCTET}$")]
# Free text the export writes as a value (an annotation, a cluster variable): one line, bounded.
ExportedText = Annotated[str, fits_export_line()]
# Where a number or a boolean is meant, nothing else is taken: `true` is not 1, "1000" is not 1000.
StrictBool = Annotated[bool, Field(strict=True)]
# An object as the export names it in a refusal: `<Kind> <namespace>/<name>`, or `<Kind> <name>` for a cluster-scoped
# one (PersistentVolumeClaim plex/plex-config).
OBJECT_REF_PATTERN = r"^[A-Z][A-Za-z0-9]* ([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
ObjectRef = Annotated[str, StringConstraints(pattern=OBJECT_REF_PATTERN, max_length=400)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False)


_IMAGE_PATTERN = \
    r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]([a-z0-9._-]*[a-z0-9])?)+:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
ImageRef = Annotated[str, StringConstraints(pattern=_IMAGE_PATTERN),
    AfterValidator(lambda ref: ref.rsplit(":", 1)[0] + ":" + _no_latest(ref.rsplit(":", 1)[1])),
    fits_export_line(suffix=_DIGEST_SUFFIX, extra=-_IMAGE_KEY_SAVING, what=" with a digest")]
# An image the export writes on a line of its own (folded, a single word yamllint allows past its line length),
# so no line rule: a registry path as long as ghcr.io's for Intel's DRA driver fits.
OwnLineImageRef = Annotated[str, StringConstraints(pattern=_IMAGE_PATTERN, max_length=255),
                            AfterValidator(lambda ref: ref.rsplit(":", 1)[0] + ":" + _no_latest(ref.rsplit(":", 1)[1]))]


# The words a refusal of a pattern uses (errors.py), for the patterns a user meets most.
PATTERN_MEANING = {
    FLUX_DURATION_PATTERN: "a Flux duration such as 30s, 10m or 1h30m",
    FLUX_VAR_NAME_PATTERN: "a Flux variable name: letters, digits and '_', not starting with a digit",
    DNS1123_LABEL: "a DNS-1123 label: lowercase letters, digits and '-', at most 63",
    DNS1123_SUBDOMAIN: "a DNS-1123 name: lowercase letters, digits, '-' and '.'",
    LABEL_KEY: "a Kubernetes label key",
    LABEL_VALUE: "a Kubernetes label value: at most 63 letters, digits, '-', '_' or '.'",
    OBJECT_REF_PATTERN: "an object as `Kind namespace/name` (`Kind name` when cluster-scoped), e.g. "
                        "PersistentVolumeClaim plex/plex-config",
}
