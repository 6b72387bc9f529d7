"""The package's dependencies point down: its import graph, read from the source with `ast`
(imports at module level and inside functions alike), has no cycle, no module imports one of the
package's own modules inside a function, and the README's reading order lists every module after
everything it imports."""

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
NAME = PACKAGE.name


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py") if "tests" not in p.relative_to(PACKAGE).parts}


def imports(path: Path, known: dict[str, Path]) -> list[tuple[str, bool]]:
    """(imported module of the package, inside a function?) for every import in the file."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []

    def visit(node, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[:len(package.split(".")) - child.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in child.names:  # `from . import x` imports the module x when there is one
                    target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                    if target.split(".")[0] == NAME:
                        found.append((target, inside))
            elif isinstance(child, ast.Import):
                found.extend((a.name, inside) for a in child.names if a.name.split(".")[0] == NAME)
            visit(child, inside or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text()), False)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: {t for t, _ in imports(p, known) if t != m} for m, p in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in edges:
        if v not in index:
            connect(v)
    return out


def test_the_import_graph_has_no_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_the_package_inside_a_function():
    known = modules()
    inside = [(m, t) for m, p in known.items() for t, deferred in imports(p, known) if deferred]
    assert inside == []


def test_the_readme_reads_in_import_order():
    """Every module of the package is in the README's map, after each module it imports (the root
    __init__ and the empty folder __init__s aside)."""
    text = (PACKAGE / "README.md").read_text()
    order = []
    for cell in re.findall(r"^\| `([^|]+)` \|", text, flags=re.M):
        for name in re.findall(r"[\w/]+\.py|[\w]+/", cell.replace("`", "")):
            order.append(name)
    position = {}
    for i, entry in enumerate(order):
        if entry.endswith("/"):  # a folder listed whole (nn/, optim/): every module in it
            for p in (PACKAGE / entry).rglob("*.py"):
                position.setdefault(module_name(p), i)
        else:
            position.setdefault(module_name(PACKAGE / entry), i)
    edges = graph()
    skip = {NAME} | {m for m, p in modules().items() if p.name == "__init__.py" and not p.read_text().strip()}
    missing = sorted(m for m in edges if m not in position and m not in skip)
    assert missing == [], f"modules missing from the README's map: {missing}"
    late = [(m, t) for m, targets in edges.items() if m in position for t in targets
            if t in position and position[t] > position[m]]
    assert late == [], f"modules listed before what they import: {late}"
