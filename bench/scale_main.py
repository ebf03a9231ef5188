"""`__main__.py` of the scale benchmark's generated project: the real program, plus BENCH_APPS Plex-like apps.

Each extra app is the real `Plex` component under another name (its own namespace, NetworkPolicies, PVCs,
Deployment, Service: 9 objects), so the export does for it exactly what it does for Plex.
"""

import os
import runpy

from components.plex import Plex

program = runpy.run_path(os.environ["GPU_PLATFORM_MAIN"], run_name="__main__")
cfg = program["cfg"]
for i in range(int(os.environ.get("BENCH_APPS", "0"))):
    Plex(f"app-{i:04d}", cfg.plex, cfg.appPolicy, program["gpu"], gpu_plugin_daemonset=program["plugin"].daemonset,
         opts=program["with_provider"])
