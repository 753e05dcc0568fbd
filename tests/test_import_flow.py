"""The product's import graph: no circle between any two modules, and data flows one way.

Every import counts, also one inside a function (a lazy import is still a dependency). The flow
(DESIGN.md section 2): ``traces`` <- ``sim`` <- ``real``; ``analysis`` reads results and never drives
``real``; a command (``sim.commands``, ``*.cli``, ``*.__main__``) may call anything, nothing below a
command may call ``analysis``. Inside ``sim`` the rooms are layered: a room imports only from its own
layer or below (the expert cache, a plain data type every policy reads, sits low with the machine).
"""
from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sim", "real", "traces", "analysis")
SIM_LAYERS = (("sim.paths",), ("sim.machine", "sim.protocol.expert_cache"), ("sim.policies",), ("sim.protocol",), ("sim.engine",),
              ("sim.prefill", "sim.speculation", "sim.run"), ("sim.plan", "sim.bound", "sim.fidelity"),
              ("sim.commands", "sim.__main__"))
FORBIDDEN = {"traces": ("sim", "real", "analysis"), "sim": ("real", "analysis"), "analysis": ("real",),
             "real": ("analysis",)}


def _modules(root: Path = ROOT) -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (root / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(root).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def _owner(name: str, modules) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: dict[str, Path]) -> dict[str, set]:
    """Module -> the product modules it imports (at any depth of its code)."""
    edges = defaultdict(set)
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                owner = _owner(t, modules)
                if owner and owner != mod:
                    edges[mod].add(owner)
    return edges


def circles(edges: dict[str, set]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
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
                out.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def _is_command(mod: str) -> bool:
    return mod.startswith("sim.commands") or mod.split(".")[-1] in ("cli", "__main__")


def _layer(mod: str) -> int | None:
    for i, rooms in enumerate(SIM_LAYERS):
        if any(mod == r or mod.startswith(r + ".") for r in rooms):
            return i
    return None


def flow_violations(edges: dict[str, set]) -> list[str]:
    """Imports against the one-way flow between packages and between ``sim``'s room layers."""
    bad = []
    for mod, targets in edges.items():
        for t in targets:
            a, b = mod.split(".")[0], t.split(".")[0]
            if b in FORBIDDEN.get(a, ()) and not _is_command(mod):
                bad.append(f"{mod} -> {t}")
            la, lb = _layer(mod), _layer(t)
            if la is not None and lb is not None and lb > la:
                bad.append(f"{mod} -> {t} (layer {la} imports layer {lb})")
    return bad


def test_no_import_circle_among_the_product_modules():
    assert circles(import_graph(_modules())) == []


def test_imports_follow_the_one_way_flow():
    assert flow_violations(import_graph(_modules())) == []


def test_every_sim_room_has_a_layer():
    rooms = {".".join(m.split(".")[:2]) for m in _modules() if m.startswith("sim.")}
    assert sorted(r for r in rooms if _layer(r) is None) == []


def test_sim_top_level_stays_small():
    assert len(list((ROOT / "sim").glob("*.py"))) <= 8


@pytest.mark.parametrize("case, expect", [
    ({"a.x": {"a.y"}, "a.y": {"a.z"}, "a.z": {"a.x"}}, [["a.x", "a.y", "a.z"]]),
    ({"a.x": {"a.y"}, "a.y": set()}, []),
])
def test_circle_finder_on_hand_graphs(case, expect):
    assert circles(case) == expect


def test_the_checks_catch_a_planted_circle_and_a_backward_import(tmp_path):
    """The checks themselves: a lazy import that closes a circle, and a policy importing the runner."""
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "sim" / "policies").mkdir()
    (tmp_path / "sim" / "policies" / "__init__.py").write_text("")
    (tmp_path / "sim" / "run").mkdir()
    (tmp_path / "sim" / "run" / "__init__.py").write_text("")
    (tmp_path / "sim" / "policies" / "lru.py").write_text("def f():\n    from sim.run.runner import run_one\n")
    (tmp_path / "sim" / "run" / "runner.py").write_text("from sim.policies import lru\n")
    (tmp_path / "traces" / "io.py").write_text("import analysis\n")
    edges = import_graph(_modules(tmp_path))
    assert circles(edges) == [["sim.policies.lru", "sim.run.runner"]]
    bad = flow_violations(edges)
    assert "traces.io -> analysis" in bad
    assert any(b.startswith("sim.policies.lru -> sim.run.runner (layer") for b in bad)


def test_no_production_function_takes_more_than_eight_parameters():
    """A function with more knobs takes a spec or an options dataclass (sim.run.spec.RunSpec, Params)."""
    wide = []
    for mod, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
                if len(names) > 8:
                    wide.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({len(names)})")
    assert wide == []
