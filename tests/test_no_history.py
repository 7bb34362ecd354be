"""The docs, the README, the package and the benchmarks describe graphcheck as it is now, for
its users: none of them cites an issue number or a pass of work on one (git keeps the history,
CHANGELOG.md what changed for users)."""

from __future__ import annotations

import re

from tests.test_cli import ROOT

# "issue 26", "issues 10, 15", "issue #3"; "the fourth pass", "issue 15's fifth pass". A
# "first pass" alone is left out: a ping-pong's first smoothing pass is the product's own
# vocabulary, as it is of the solvers graphcheck checks.
HISTORY = re.compile(
    r"\bissues?\s+#?\d+|\b(?:second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth)\s+pass(?:es)?\b"
    r"|'s\s+first\s+pass\b",
    re.IGNORECASE,
)


def cited_history(text: str) -> list[str]:
    """Each place in ``text`` that cites an issue or a pass, as ``line: match``."""
    return [f"{text.count(chr(10), 0, m.start()) + 1}: {m.group()}" for m in HISTORY.finditer(text)]


def test_the_pattern_finds_history_and_leaves_the_products_own_words():
    history = "issue 26's fifth pass cut it (issues 10, 15); the fourth\npass; see issue #3; Issue 23's first pass"
    assert [hit.split(": ")[1] for hit in cited_history(history)] == [
        "issue 26", "fifth pass", "issues 10", "fourth\npass", "issue #3", "Issue 23", "'s first pass",
    ]  # fmt: skip
    words = "a ping-pong of smoothing passes whose first pass overwrites its buffer; a check passes; pass owners="
    assert cited_history(words) == []


def test_docs_readme_package_and_benchmarks_cite_no_issue_or_pass():
    files = [ROOT / "README.md"] + [
        path
        for folder in ("docs", "graphcheck", "benchmarks")
        for path in sorted((ROOT / folder).rglob("*"))
        if path.suffix in {".md", ".py", ".txt", ".json", ".toml"} and "_build" not in path.parts
    ]
    assert len(files) > 50
    cited = {str(path.relative_to(ROOT)): hits for path in files if (hits := cited_history(path.read_text()))}
    assert cited == {}, "describe the product as it is now; history belongs to git and CHANGELOG.md"
