"""The README is for a newcomer (at most 300 lines) and every link in it and in docs/
stays inside the repository and resolves, anchors included; no text cites issue numbers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
ISSUE_CITATION = re.compile(r"\bissues? #?\d|(?<![\w&])#\d+\b", re.IGNORECASE)


def heading_slugs(text: str) -> set[str]:
    """GitHub's anchors of a Markdown page's headings (code blocks skipped)."""
    slugs: set[str] = set()
    seen: dict[str, int] = {}
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        slugs.add(slug if count == 0 else f"{slug}-{count}")
    return slugs


def link_problems(page: Path, root: Path = ROOT) -> list[str]:
    problems = []
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for match in LINK.finditer(text):
        target = match.group(1)
        if re.match(r"[a-z]+:", target) or target.startswith("//"):
            problems.append(f"{page.name}: external link {target}")
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page.resolve()
        if root not in dest.parents and dest != root:
            problems.append(f"{page.name}: link leaves the repository: {target}")
        elif not dest.exists():
            problems.append(f"{page.name}: missing {target}")
        elif anchor and dest.suffix == ".md" and anchor not in heading_slugs(dest.read_text(encoding="utf-8")):
            problems.append(f"{page.name}: missing anchor {target}")
    return problems


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 300


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_resolve_inside_the_repository(page):
    assert link_problems(page) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_issue_numbers(page):
    cited = [line for line in page.read_text(encoding="utf-8").splitlines() if ISSUE_CITATION.search(line)]
    assert cited == []


def test_the_link_check_can_fail(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n[a](missing.md) [b](https://example.org) [c](#title) [d](#nope)\n")
    (tmp_path / "other.md").write_text("# Other\n")
    page.write_text(page.read_text() + "[e](other.md#other) [f](../outside.md)\n")
    problems = link_problems(page, root=tmp_path)
    assert len(problems) == 4, problems
