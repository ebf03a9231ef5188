"""The export pipeline: the program's run, its tree, Flux's view of the repository, the checks and the writes into
OUT, and the commands that drive them (docs/architecture.md walks it module by module)."""
