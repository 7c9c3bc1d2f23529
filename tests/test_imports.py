"""The chat edge reaches simulations through their facade only: no module of bot/ imports a
module of engine/sim other than engine/sim/simulations.py (which re-exports the few names the
chat needs). Read from the code's syntax tree, imports inside functions and TYPE_CHECKING blocks
included."""
from __future__ import annotations

import ast

from tests.conftest import REPO

FACADE = "engine.sim.simulations"


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every import in the tree; ``from a import b`` counts as ``a.b`` too, since b
    may be a module."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def beside_the_facade(module: str) -> bool:
    """Whether ``module`` is engine.sim or one of its modules but not the facade (or a name in it)."""
    if module == FACADE or module.startswith(FACADE + "."):
        return False
    return module == "engine.sim" or module.startswith("engine.sim.")


def test_bot_imports_no_simulation_module_but_the_facade():
    found = []
    for path in sorted((REPO / "bot").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        found += [f"{path.relative_to(REPO)}:{line} imports {module}"
                  for line, module in imported_modules(tree) if beside_the_facade(module)]
    assert found == [], "bot/ reaches engine.sim only through engine.sim.simulations:\n" + "\n".join(found)


def test_the_rule_sees_each_way_of_importing():
    tree = ast.parse("import engine.sim.records\nfrom engine.sim import records\nfrom engine import sim\n"
                     "def f():\n    from engine.sim.run.output import platforms_of\n"
                     "from engine.sim.simulations import SimRecord\nfrom engine.memory import Viewer\n")
    assert [(line, m) for line, m in imported_modules(tree) if beside_the_facade(m)] == [
        (1, "engine.sim.records"), (2, "engine.sim"), (2, "engine.sim.records"), (3, "engine.sim"),
        (5, "engine.sim.run.output"), (5, "engine.sim.run.output.platforms_of")]
