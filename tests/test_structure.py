"""The package's shape, read from its source with ``ast``: imports form no circle, the core
never imports Airflow, the root holds only the package's faces, modules stay small."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "airflow_provider_streamql"
NAME = PACKAGE.name
#: what a user of the package imports from its root; everything else lives in a subpackage
FACES = {"__init__", "engine", "errors", "results", "cli", "conditions", "get_provider_info"}
#: the Airflow half (DESIGN.md section 1): nothing outside it may import airflow
AIRFLOW_HALF = {"hooks", "operators", "sensors", "triggers", "plugins", "assets", "get_provider_info"}
MAX_LINES = 400
#: a longer module says why on a line starting with this
LONG_MODULE_NOTE = "# long module:"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str) -> set[str]:
    """Every module of the package that ``name`` imports: at the top, inside functions and
    under TYPE_CHECKING alike (a circle hidden in a function is still a circle)."""
    path = MODULES[name]
    here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = ".".join(here[:len(here) - node.level + 1] + [node.module or ""]).strip(".") \
                if node.level else (node.module or "")
            subs = {f"{base}.{a.name}" for a in node.names} & MODULES.keys()
            found |= subs if len(subs) == len(node.names) else subs | ({base} & MODULES.keys())
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names} & MODULES.keys()
    return found - {name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": set()}, []),
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
])
def test_the_cycle_finder_finds_cycles(graph, expected):
    assert sorted(cycles(graph)) == expected


def test_the_import_walk_sees_relative_lazy_and_type_checking_imports():
    seen = imports(f"{NAME}.engine")
    assert {f"{NAME}.catalog", f"{NAME}.conditions", f"{NAME}.planner.deploy"} <= seen
    assert f"{NAME}.runtime.dryrun" in seen  # imported inside Engine.dry_run


def test_no_import_circle_inside_the_package():
    assert cycles({name: imports(name) for name in MODULES}) == []


def test_the_core_never_imports_airflow():
    for name, path in MODULES.items():
        top = name.split(".")[1] if "." in name else ""
        if top in AIRFLOW_HALF:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            assert not [t for t in targets if t.split(".")[0] == "airflow"], f"{name} imports airflow"


def test_the_root_holds_only_the_faces():
    root = {p.stem for p in PACKAGE.glob("*.py")}
    assert root == FACES, f"move {sorted(root - FACES)} into the subpackage it belongs to"


def test_modules_stay_small_or_say_why():
    long = [f"{name} ({len(path.read_text().splitlines())} lines)" for name, path in MODULES.items()
            if len(path.read_text().splitlines()) > MAX_LINES
            and not any(line.startswith(LONG_MODULE_NOTE) for line in path.read_text().splitlines())]
    assert long == [], f"split these or say why on a line starting with {LONG_MODULE_NOTE!r}"
