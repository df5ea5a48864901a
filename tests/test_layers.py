"""The package's layers (docs/design.md, "Layers"): imports go down, never into another module's
private names, and never in a circle."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "dlap"


def _modules() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, str]]:
    """(module imported, name imported) for every dlap import of ``name``, relative ones resolved."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "dlap":
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    found.append((full if full in MODULES else target, alias.name))
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names if alias.name.split(".")[0] == "dlap"]
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}

#: what each layer must not import (prefixes), and the exceptions it may
FORBIDDEN = {
    "dlap.hungarian": (("dlap.backends", "dlap.distributed", "dlap.dgs", "dlap.api", "dlap.batch"), ()),
    "dlap.dgs": (("dlap.hungarian", "dlap.distributed", "dlap.api", "dlap.batch"), ()),
    "dlap.backends": (("dlap.hungarian", "dlap.distributed", "dlap.api", "dlap.batch", "dlap.dgs"),
                      ("dlap.hungarian.state", "dlap.dgs.state", "dlap.dgs.primitives")),
    "dlap.distributed.rank": (("dlap.api", "dlap.distributed.solve", "dlap.distributed.data"), ()),
    "dlap.points": (("dlap.api", "dlap.distributed", "dlap.hungarian", "dlap.dgs", "dlap.batch"), ()),
    "dlap.problem": (("dlap.backends", "dlap.hungarian", "dlap.distributed", "dlap.api"), ()),
    "dlap.certificate": (("dlap.backends", "dlap.hungarian", "dlap.distributed", "dlap.api"), ()),
}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(layer):
    forbidden, allowed = FORBIDDEN[layer]
    upward = [
        (name, target)
        for name, imports in GRAPH.items() if _within(name, layer)
        for target, _ in imports
        if any(_within(target, f) for f in forbidden) and not any(_within(target, a) for a in allowed)
    ]
    assert upward == []


def test_only_the_front_ends_import_the_command_line_and_the_benchmarks():
    users = {name for name, imports in GRAPH.items() for target, _ in imports
             if _within(target, "dlap.cli") or _within(target, "dlap.bench")}
    assert {name for name in users if not _within(name, "dlap.bench") and name not in ("dlap.cli", "dlap.__main__")} == set()


def test_no_module_imports_another_modules_private_names():
    private = [(name, target, imported) for name, imports in GRAPH.items() for target, imported in imports
               if imported.startswith("_") and not imported.startswith("__")]
    assert private == []


def test_no_import_cycle():
    edges = {name: {t for t, _ in imports if t in MODULES and t != name} for name, imports in GRAPH.items()}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    assert cycles == []
