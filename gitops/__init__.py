"""The export pipeline. Importing it first puts the import-time speed levers in place (gitops/lazy_imports.py:
pulumi_kubernetes with postponed annotations, the SDK's unused parts loaded on first use), before anything imports
the Pulumi SDK; `GPU_PLATFORM_LEVERS_OFF` switches them off (gitops/levers.py)."""

from gitops import lazy_imports

lazy_imports.install()
