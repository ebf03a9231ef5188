"""The cdk8s peer for `make bench`: synthesise the identical object set with cdk8s.

Input: a JSON file of manifests grouped by output folder (written by bench/run.py from this project's own export),
so both tools produce the same objects. Each folder becomes a cdk8s Chart; each manifest an ApiObject. cdk8s's
`app.synth()` writes one YAML file per chart. Runs in its own venv (bench/requirements-cdk8s.txt), never the
product's.

With BENCH_RUSAGE_OUT set, writes there, as JSON, the peak resident set (ru_maxrss, KiB) of this Python process and
of its Node child (the jsii kernel), read once jsii has stopped and waited for Node at exit.
"""

import atexit
import json
import os
import resource
import sys


def _report_rusage(path: str) -> None:
    with open(path, "w") as f:
        json.dump({"python_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                   "node_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}, f)


# Registered before cdk8s is imported: atexit runs handlers last-in first-out, so this one runs after jsii's own
# handler has stopped the Node process and waited for it (RUSAGE_CHILDREN counts waited-for children only).
if os.environ.get("BENCH_RUSAGE_OUT"):
    atexit.register(_report_rusage, os.environ["BENCH_RUSAGE_OUT"])

# Installed only in the bench's own cdk8s venv (bench/run.py ensure_cdk8s_venv), never in the product's .venv.
import cdk8s  # noqa: E402  # pyright: ignore[reportMissingImports]
from constructs import Construct  # noqa: E402  # pyright: ignore[reportMissingImports]

KNOWN = ("apiVersion", "kind", "metadata")


class FolderChart(cdk8s.Chart):
    def __init__(self, scope: Construct, chart_id: str, manifests: list[dict]) -> None:
        super().__init__(scope, chart_id, disable_resource_name_hashes=True)
        for i, m in enumerate(manifests):
            obj = cdk8s.ApiObject(self, f"o{i}", api_version=m["apiVersion"], kind=m["kind"],
                                  metadata=cdk8s.ApiObjectMetadata(
                                      name=m["metadata"]["name"], namespace=m["metadata"].get("namespace"),
                                      labels=m["metadata"].get("labels"), annotations=m["metadata"].get("annotations")))
            for key, value in m.items():
                if key not in KNOWN:
                    obj.add_json_patch(cdk8s.JsonPatch.add(f"/{key}", value))


def main(manifests_file: str, outdir: str) -> None:
    folders = json.load(open(manifests_file))
    app = cdk8s.App(outdir=outdir, yaml_output_type=cdk8s.YamlOutputType.FILE_PER_CHART)
    for i, (_folder, manifests) in enumerate(sorted(folders.items())):
        FolderChart(app, f"c{i}", manifests)
    app.synth()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
