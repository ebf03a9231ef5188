"""The core: stack config, evidence, where things land, the typed outputs, the Flux graph rules, the safe reader.

Pure: it imports neither the program's components nor the export (pyproject.toml's import-linter contracts).
"""
