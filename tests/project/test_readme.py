"""README.md, the page a platform engineer meets first (issue 44): short, free of one machine's dates and timings,
every relative link pointing at something that exists, and the two commands in its first code block."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_BYTES = 12 * 1024

FENCED = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]+`")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
# A measured duration: a number and a unit of time ("42.8 min", "20 s", "1,028 ms", "3 hours"). Not `10m` or `30Gi`.
DURATION = re.compile(r"\b\d[\d,]*(?:\.\d+)? ?(?:ms|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?)\b", re.IGNORECASE)
# Where and when a figure was taken: "as run here", "on 2 shared cores", "on a loaded machine".
MACHINE = re.compile(r"\bas run here\b|\bon \d+ (?:shared |loaded )?(?:cpu )?cores?\b"
                     r"|\bon (?:a|this) (?:loaded|shared) machine\b|\bload \d", re.IGNORECASE)
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _text() -> str:
    return README.read_text(encoding="utf-8")


def _prose(text: str) -> str:
    """The README without its code. Code holds configuration, not measurements: a Flux `interval: 30s` or a Chainsaw
    `--assert-timeout 10m` is a setting the reader copies, so durations are looked for in prose only (dates and the
    machine's words are looked for everywhere)."""
    return INLINE_CODE.sub("", FENCED.sub("", text))


def _relative_links(text: str) -> list[str]:
    return [target for target in LINK.findall(text)
            if not re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) and not target.startswith("#")]


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(markdown: Path) -> set[str]:
    headings = re.findall(r"^#{1,6} (.+)$", FENCED.sub("", markdown.read_text(encoding="utf-8")), re.MULTILINE)
    return {_slug(h) for h in headings}


def test_the_readme_is_at_most_12_kib():
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, f"README.md is {size} bytes, over {MAX_BYTES}: move the detail into docs/"


def test_no_date_appears_in_the_readme():
    assert DATE.findall(_text()) == [], "a date belongs to docs/testing.md, docs/performance.md or tools/README.md"


def test_no_development_machine_timing_appears_in_the_readme_prose():
    text = _text()
    found = [m.group(0) for m in DURATION.finditer(_prose(text))] + [m.group(0) for m in MACHINE.finditer(text)]
    assert found == [], "a measured time belongs to docs/testing.md, docs/performance.md or tools/README.md"


def test_the_timing_patterns_catch_a_measurement_and_spare_settings_in_code():
    sample = ("The first build took 42.8 min on 2 shared cores, as run here; an export 20 s, the suite 1,028 ms.\n"
              "```yaml\ninterval: 30s\n```\nPlex's Kustomization waits `10m`; its claim asks for `30Gi`.\n")
    assert [m.group(0) for m in DURATION.finditer(_prose(sample))] == ["42.8 min", "20 s", "1,028 ms"]
    assert [m.group(0) for m in MACHINE.finditer(sample)] == ["on 2 shared cores", "as run here"]
    assert DURATION.findall(_prose("5 steps, 3 nodes, 115Mi, v0.36.0, `make test`")) == []


def test_every_relative_link_of_the_readme_names_a_file_that_exists():
    links = _relative_links(_text())
    assert "docs/config.md" in links and "examples/README.md" in links  # the pattern finds the README's links
    missing = [link for link in links if not (ROOT / link.split("#")[0]).exists()]
    assert missing == []


def test_every_anchor_of_a_readme_link_names_a_heading_of_its_page():
    broken = []
    for link in _relative_links(_text()):
        path, _, anchor = link.partition("#")
        target = ROOT / path
        if anchor and target.suffix == ".md" and target.is_file() and anchor not in _anchors(target):
            broken.append(link)
    assert broken == []


def test_the_readme_names_make_export_stack_prod_and_make_test_in_its_first_code_block():
    blocks = FENCED.findall(_text())
    assert blocks, "the README has no code block"
    assert re.search(r"^make export STACK=prod\b", blocks[0], re.MULTILINE), blocks[0]
    assert re.search(r"^make test\b(?!-)", blocks[0], re.MULTILINE), blocks[0]
