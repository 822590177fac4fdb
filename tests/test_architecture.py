"""The house, drawn from the code's imports: the arrows between packages point one way
(docs/architecture.md), no module imports its way back to itself, nothing imports the
application, and the servo tick stays one short function."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("capture_trainer", "guidance", "haptics", "robot", "scenarios", "trials", "analysis", "app", "benchmarks")
#: Which of our packages each package may import (besides itself).
ALLOWED: dict[str, set[str]] = {
    "capture_trainer": set(),
    "guidance": {"capture_trainer"},
    "robot": {"capture_trainer"},
    "scenarios": {"capture_trainer"},
    "haptics": {"capture_trainer", "guidance"},
    "analysis": {"capture_trainer"},
    "trials": {"capture_trainer", "guidance", "haptics", "robot", "scenarios"},
    "benchmarks": {"capture_trainer", "guidance", "haptics", "robot", "scenarios", "trials", "analysis"},
    "app": {"capture_trainer", "guidance", "haptics", "robot", "scenarios", "trials", "analysis", "benchmarks"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of our modules that ``path`` imports (anywhere in the file, type-only
    imports under ``if TYPE_CHECKING`` included: they are arrows too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found.update(name for name in names if name.split(".")[0] in PACKAGES)
    return found


def _graph() -> dict[str, set[str]]:
    modules = {
        _module_name(path): path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in _imports(path):
            # "from a.b import c" names module a.b.c when it exists, else a.b
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


GRAPH = _graph()


def test_packages_import_only_downward():
    wrong = sorted(
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in targets
        if (source := module.split(".")[0]) != (dest := target.split(".")[0]) and dest not in ALLOWED[source]
    )
    assert wrong == []


def test_nothing_imports_the_application():
    assert sorted(m for m, ts in GRAPH.items() if not m.startswith("app") and any(t.startswith("app") for t in ts)) == []


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_cycle_between_modules():
    assert _cycle(GRAPH) is None


def test_no_import_cycle_between_packages():
    packages: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        source = module.split(".")[0]
        packages.setdefault(source, set()).update(t.split(".")[0] for t in targets if t.split(".")[0] != source)
    assert _cycle(packages) is None


def _cycle_detector_finds(graph: dict[str, set[str]]) -> bool:
    return _cycle(graph) is not None


@pytest.mark.parametrize(
    ("graph", "expected"),
    [({"a": {"b"}, "b": {"a"}}, True), ({"a": {"b"}, "b": {"c"}, "c": set()}, False), ({"a": {"a"}}, True)],
)
def test_the_cycle_detector_can_fail(graph, expected):
    assert _cycle_detector_finds(graph) is expected


def test_the_tick_reads_on_one_screen():
    from trials.tick import ServoTick

    lines = inspect.getsource(ServoTick.__call__).splitlines()
    assert len(lines) <= 40
