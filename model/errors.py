"""The one shape of every refusal: a list of lines, each `<file>: <key or path>: <problem>; hint: <fix>`, which the
commands print as `error: <line>` and exit 2. Every refusing exception of the project derives from `RefusalError`; those
the program raises also derive from `pulumi.RunError`, which the Pulumi CLI prints without a traceback."""

from __future__ import annotations

from collections.abc import Iterable


class RefusalError(Exception):
    """One line per problem; `str()` is the lines joined."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = list(lines)
        super().__init__("\n".join(self.lines))
