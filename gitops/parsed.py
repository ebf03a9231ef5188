"""YAML documents parsed once per content for the whole export: the Flux walk reads every file the export is about to
write, the index hashes each of them, and the plan hashes what is on disk (mostly the same bytes). Each distinct
content is parsed once; callers only read what they get (a tuple of the documents, shared)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import yaml

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Enough for every file of a 1,000-app export (about nine files per app) seen twice; parse errors are not cached.
PARSED_CONTENTS_MAX = 32_768


@lru_cache(maxsize=PARSED_CONTENTS_MAX)
def yaml_documents(data: bytes) -> tuple[Any, ...]:
    """Every document of `data`, None for an empty one. Raises what yaml.load_all raises (YAMLError, RecursionError,
    UnicodeDecodeError, ValueError); the callers turn that into their own one-line error."""
    return tuple(yaml.load_all(data, Loader=LOADER))
