"""The package's shape, read from its source with ``ast``: imports form no circle and never
climb back up the layers, the core never imports Airflow, the Airflow half comes in through
the facade's door only, the root holds only the package's faces, modules stay small."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "airflow_provider_streamql"
NAME = PACKAGE.name
#: what a user of the package imports from its root; everything else lives in a subpackage
FACES = {"__init__", "engine", "errors", "results", "cli", "conditions", "get_provider_info"}
#: the Airflow half (DESIGN.md section 1): nothing outside it may import airflow
AIRFLOW_HALF = {"hooks", "operators", "sensors", "triggers", "plugins", "assets", "get_provider_info"}
#: the layers, lowest first (DESIGN.md section 1): a module imports from its own layer and
#: those below. errors and results are the currency every layer pays in (they import nothing
#: of the package), so they sit at the bottom with the version; the read model (views) reads
#: the catalog and storage and is read by the planner, the runtime and the faces; upgrades
#: stands on the language alone, below the planner that runs it
LAYERS = {
    "__init__": 0,
    "errors": 0,
    "results": 0,
    "language": 1,
    "catalog": 2,
    "storage": 3,
    "views": 4,
    "upgrades": 5,
    "planner": 6,
    "runtime": 7,
    "engine": 8,
    "conditions": 8,
    "cli": 8,
    **dict.fromkeys(AIRFLOW_HALF, 9),
}
#: "importer -> imported" climbs kept for now, each with why (none: add one only with a reason)
CLIMBS_ALLOWED: dict[str, str] = {}
#: what the Airflow half may import of the core: the facade's public surface. The engine (with
#: the values its methods return), the conditions it waits on, results, errors, the version,
#: and the language's statements and grammar of names (callers hand the engine parsed
#: statements); never planner/, runtime/, storage/, catalog/, views/ or upgrades/
DOOR = {"__init__", "engine", "conditions", "results", "errors", "language", "language.statements"}
MAX_LINES = 400
#: a longer module says why on a line starting with this
LONG_MODULE_NOTE = "# long module:"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def short(name: str) -> str:
    """A module's name inside the package (``__init__`` for the package itself)."""
    return name[len(NAME) + 1 :] if name.startswith(f"{NAME}.") else "__init__"


def part(name: str) -> str:
    """The top-level part a module belongs to: a subpackage, or a face at the root."""
    return short(name).split(".")[0]


def climbs(importer: str, imported: str) -> bool:
    """Whether ``importer`` importing ``imported`` runs back up the layers."""
    return LAYERS[part(imported)] > LAYERS[part(importer)]


def through_the_door(importer: str, imported: str) -> bool:
    """Whether a module of the Airflow half may import ``imported``: the Airflow half
    itself, or the facade's public surface (:data:`DOOR`)."""
    return part(importer) not in AIRFLOW_HALF or part(imported) in AIRFLOW_HALF or short(imported) in DOOR


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


def q(name: str) -> str:
    return f"{NAME}.{name}" if name != "__init__" else NAME


@pytest.mark.parametrize("importer, imported, climb", [
    ("catalog.urls", "storage.layout", True),
    ("storage.layout", "catalog.urls", False),
    ("runtime.main", "cli", True),
    ("runtime.metrics", "conditions", True),
    ("planner.reads", "views.describe", False),
    ("views.describe", "planner.control", True),
    ("views.describe", "runtime.state", True),
    ("planner.planning", "results", False),
    ("results", "planner", True),
    ("conditions", "engine", False),
    ("engine", "hooks.streamql", True),
    ("get_provider_info", "__init__", False),
])
def test_the_layer_rule_sees_a_climb(importer, imported, climb):
    assert climbs(q(importer), q(imported)) is climb


def test_every_part_of_the_package_has_a_layer():
    unplaced = sorted({part(name) for name in MODULES} - LAYERS.keys())
    assert unplaced == [], f"give {unplaced} a place in LAYERS (DESIGN.md section 1)"


@pytest.mark.parametrize("layer", sorted(LAYERS, key=lambda p: (LAYERS[p], p)))
def test_no_module_imports_from_a_higher_layer(layer):
    found = [
        f"{short(name)} -> {short(other)}"
        for name in MODULES
        if part(name) == layer
        for other in sorted(imports(name))
        if climbs(name, other)
    ]
    assert [c for c in found if c not in CLIMBS_ALLOWED] == [], "move what these need down a layer"


@pytest.mark.parametrize("importer, imported, allowed", [
    ("operators.base", "engine", True),
    ("operators.queries", "conditions", True),
    ("operators.snapshots", "language.statements", True),
    ("assets.streamql", "language", True),
    ("plugins.app", "hooks.streamql", True),
    ("get_provider_info", "__init__", True),
    ("hooks.streamql", "catalog", False),
    ("operators.runtime", "storage.layout", False),
    ("operators.queries", "runtime", False),
    ("operators.queries", "upgrades.report", False),
    ("triggers.events", "views.events", False),
    ("triggers.events", "language.names", False),
    ("plugins.overview", "planner.reads", False),
    ("planner.reads", "views.describe", True),  # the core is not behind the door
])
def test_the_door_rule_sees_an_import_past_it(importer, imported, allowed):
    assert through_the_door(q(importer), q(imported)) is allowed


@pytest.mark.parametrize("name", [n for n in MODULES if part(n) in AIRFLOW_HALF])
def test_the_airflow_half_comes_in_through_the_door(name):
    past = sorted(short(other) for other in imports(name) if not through_the_door(name, other))
    assert past == [], f"{short(name)} reaches past the facade: make what it needs a method of Engine"


#: what is behind the engine: its attributes the Airflow half may not reach through
BEHIND_THE_ENGINE = {"catalog"}


def reaches_behind(source: str) -> list[str]:
    """The attributes behind the engine that ``source`` names (``engine.catalog.queries()``
    reaches into the catalog without importing it)."""
    return sorted({n.attr for n in ast.walk(ast.parse(source))
                   if isinstance(n, ast.Attribute) and n.attr in BEHIND_THE_ENGINE})


@pytest.mark.parametrize("source, behind", [
    ("engine.catalog.queries()", ["catalog"]),
    ("e.catalog.leases.holders().get(q)", ["catalog"]),
    ("settings['catalog'] = engine.catalog_url", []),
    ("engine.query_infos()", []),
])
def test_the_behind_rule_sees_a_reach_into_the_catalog(source, behind):
    assert reaches_behind(source) == behind


@pytest.mark.parametrize("name", [n for n in MODULES if part(n) in AIRFLOW_HALF])
def test_the_airflow_half_never_reaches_behind_the_engine(name):
    behind = reaches_behind(MODULES[name].read_text())
    assert behind == [], f"{short(name)} reaches {behind} behind the engine: make what it needs a method of Engine"


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
    # a face may grow into a package of its own (cli/: the command and its shell)
    root = {p.stem for p in PACKAGE.glob("*.py")} | {p.parent.name for p in PACKAGE.glob("*/__init__.py")} & FACES
    assert root == FACES, f"move {sorted(root - FACES)} into the subpackage it belongs to"


def test_modules_stay_small_or_say_why():
    long = [f"{name} ({len(path.read_text().splitlines())} lines)" for name, path in MODULES.items()
            if len(path.read_text().splitlines()) > MAX_LINES
            and not any(line.startswith(LONG_MODULE_NOTE) for line in path.read_text().splitlines())]
    assert long == [], f"split these or say why on a line starting with {LONG_MODULE_NOTE!r}"


def test_the_readme_layout_matches_the_tree():
    readme = (PACKAGE.parent / "README.md").read_text()
    layout = readme.split("## Layout", 1)[1].split("```")[1]
    named = set(re.findall(r"\b([a-z_]+(?:/|\.py))", layout))
    parts = {f"{p}/" if (PACKAGE / p).is_dir() else f"{p}.py" for p in {part(n) for n in MODULES} - {"__init__"}}
    assert sorted(parts - named) == [], "the README's layout leaves these out"
    listed = set(re.findall(r"^  ([a-z_]+)/", layout, re.MULTILINE))
    assert sorted(listed - {p.rstrip("/") for p in parts}) == [], "the README's layout names folders that are gone"
