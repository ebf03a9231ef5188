"""`kubectl kustomize --load-restrictor LoadRestrictionsNone` on a folder: what the walk asks of kubectl where a
kustomization does more than list local resources. Bounded in time, without a kubeconfig; a failure is kubectl's
last line, its paths made relative to the repository."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

from gitops.flux.documents import BuildError, load_docs

KUBECTL_TIMEOUT_SECONDS = 120
# kubectl's log prefix on its last line: `E1203 11:47:47.328723   30467 run.go:72] "command failed" err=`
_KLOG_PREFIX = re.compile(r'^[EWIF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] (?:"command failed" err=)?')


def kustomize_build(path: Path, root: Path, folder: str) -> list[dict[str, Any]]:
    """The objects kubectl builds at `path` (the repository's `folder`, or an overlay of it; `root` is where the
    repository is on disk), or a BuildError naming `folder`."""
    try:
        result = subprocess.run(
            ["kubectl", "kustomize", "--load-restrictor", "LoadRestrictionsNone", str(path)],
            capture_output=True, timeout=KUBECTL_TIMEOUT_SECONDS, env={**os.environ, "KUBECONFIG": os.devnull})
    except FileNotFoundError:
        raise BuildError(f"{folder}: needs `kubectl kustomize` (its kustomization does more than list "
                         "resources) and kubectl is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise BuildError(f"{folder}: kubectl kustomize did not finish in {KUBECTL_TIMEOUT_SECONDS} s") from None
    if result.returncode != 0:
        # Paths relative to the repository (kustomize names them absolute, or from the folder it builds), without
        # klog's prefix
        message = result.stderr.decode(errors="replace").strip().replace(str(root) + "/", "").replace(
            os.path.relpath(root, path) + "/", "")
        last = _KLOG_PREFIX.sub("", message.splitlines()[-1]) if message else "?"
        if len(last) > 1 and last[0] == last[-1] == '"':  # klog's err="…", a Go-quoted string
            try:
                last = json.loads(last)
            except ValueError:
                pass
        raise BuildError(f"{folder}: kustomize build failed: {last}")
    return load_docs(result.stdout, f"{folder} (kustomize output)", lists=False)
