"""Structure rules the code keeps (issue 11): no import cycles between our modules, and every
import inside a function says why in a comment (otherwise it belongs at the top)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("coordinator", "worker")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            if p.name.endswith("_pb2.py") or p.name.endswith("_pb2_grpc.py"):
                continue
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _top_level_imports(name: str, path: Path, mods: dict) -> set[str]:
    """Modules of ours that ``name`` imports when it is imported (not under TYPE_CHECKING, not in
    functions)."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    base = name.split(".") if is_pkg else name.split(".")[:-1]
    found = set()

    def visit(body):
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for h in getattr(node, "handlers", []):
                    visit(h.body)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                mod = ".".join(base[:len(base) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else node.module
                found.add(mod)
                found.update(f"{mod}.{a.name}" for a in node.names)   # `from pkg import submodule`
    visit(tree.body)
    return {m for m in found if m in mods and m != name}


def test_no_import_cycles():
    mods = _modules()
    graph = {m: _top_level_imports(m, p, mods) for m, p in mods.items()}
    # a package's own __init__ importing its submodules is how packages work; a cycle needs
    # a submodule importing its way back to a module that imports it
    cycles, index, low, stack, on, n = [], {}, {}, [], set(), [0]

    def strong(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w in mods and not v.startswith(w + "."):   # a submodule may import its package
                if w not in index:
                    strong(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for m in sorted(graph):
        if m not in index:
            strong(m)
    assert cycles == [], f"import cycles: {cycles}"


def test_imports_inside_functions_say_why():
    bad = []
    for path in _modules().values():
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    line, k = lines[node.lineno - 1], node.lineno - 2
                    while lines[k].strip().startswith(("from ", "import ")):   # a run of imports shares one comment
                        k -= 1
                    if "#" not in line and not lines[k].strip().startswith("#"):
                        bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {line.strip()}")
    assert bad == [], "imports inside functions without a comment saying why:\n" + "\n".join(sorted(set(bad)))
