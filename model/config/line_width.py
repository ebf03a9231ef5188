"""The value-length rule: a string from stack config must fit on one line of the exported YAML.

exported_width measures a value as the export's YAML emitters write it; fits_export_line is the rule as a pydantic
validator, bounded by the export's yamllint line length and the longest key the export writes before a value.
"""

from __future__ import annotations

from functools import lru_cache

import yaml
from pydantic import AfterValidator

from model.labels import SHARED_DEV_NUM_REASON_ANNOTATION

# Value lengths, one rule: every string from stack config that the export writes into its YAML must fit on one line
# of the export's own yamllint (`.yamllint.yaml` line-length), after the longest `indentation + key: ` the export
# puts before such a value: the DaemonSet's `    gpu-platform.home.arpa/shared-dev-num-reason: ` (every other
# site is shorter: Plex's env values sit behind 14 spaces and `value: `, a tier path behind `  path: `). A value is
# measured as it is written (quotes and escapes included); text the export writes into the same scalar (an image
# repository, a component folder) or a key taken from config (cluster variables, label keys) counts with it.
# `rules.line-length.max` of .yamllint.yaml, the yamllint config the export lints its tree with: a constant, so the
# core reads no file when it is imported (tests/model/config/test_line_width.py holds the two equal).
EXPORT_LINE_MAX = 160
EXPORT_VALUE_PREFIX = len(f"    {SHARED_DEV_NUM_REASON_ANNOTATION}: ")
MAX_EXPORTED_VALUE = EXPORT_LINE_MAX - EXPORT_VALUE_PREFIX
_EMITTERS = tuple({getattr(yaml, "CSafeDumper", yaml.SafeDumper), yaml.SafeDumper})  # both the export may use


@lru_cache(maxsize=4096)  # pure; every stack value is measured on each run, and emitting it twice is not free
def exported_width(value: str) -> int | None:
    """Characters `value` takes as the export writes it as a mapping value, or None when it would not be written on
    one line (a line break, or a string so long the emitter folds it)."""
    widths = []
    for dumper in _EMITTERS:
        text = yaml.dump({"k": value}, Dumper=dumper, default_flow_style=False, width=4096, allow_unicode=True)
        body = text[len("k: "):].removesuffix("\n")
        if "\n" in body:
            return None
        widths.append(len(body))
    return max(widths)


def fits_export_line(prefix: str = "", suffix: str = "", extra: int = 0, what: str = "") -> AfterValidator:
    """The value-length rule as a pydantic validator. The export writes `prefix + value + suffix` as one scalar,
    and `extra` more characters on its line (the `: value` after a key from config)."""

    def check(value: str) -> str:
        width = exported_width(prefix + value + suffix)
        if width is None:
            raise ValueError("must be one line of text: the export writes it on one line of YAML; hint: remove the "
                             "line breaks")
        width += extra
        if width > MAX_EXPORTED_VALUE:
            raise ValueError(f"{width} characters as exported{what}, above the {MAX_EXPORTED_VALUE} that fit on one "
                             f"{EXPORT_LINE_MAX}-character line (.yamllint.yaml) after the key the export writes "
                             f"before it; hint: shorten it by {width - MAX_EXPORTED_VALUE} character"
                             + ("s" if width - MAX_EXPORTED_VALUE > 1 else ""))
        return value

    return AfterValidator(check)
