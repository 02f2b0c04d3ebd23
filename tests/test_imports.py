"""The import structure of `castdata/`: no cycles, no import up a layer; and no test module imports another.

The imports are read with `ast` (nothing is imported). An import inside `if TYPE_CHECKING:` is an annotation only
and never runs, so it is left out (a cycle through one is allowed). An import inside a function (a lazy import)
runs when the function does: it counts, so a lazy import that closes a cycle or runs up a layer fails here too.
An import names the module it names: `from castdata.envs import load_domain` depends on `castdata.envs` (its
`__init__`), `from castdata.builders import critic` on the submodule `castdata.builders.critic`.
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "castdata"

# The layers, bottom first: a module may import from its own layer and the layers below. A module belongs to the
# layer of its most specific pattern (most dotted parts), e.g. `castdata.rollout.collect` is "collect", the rest
# of `castdata.rollout` is "rollout".
LAYERS: list[tuple[str, list[str]]] = [
    ("leaves", ["castdata.errors", "castdata.redact", "castdata.ui", "castdata.version"]),
    # config sections' schemas, which `castdata.config` assembles: plain pydantic models
    ("schemas", ["castdata.models.spec", "castdata.*.options"]),
    # the records, typed access to their messages, the run directory that holds them, what the agent saw of them
    # and the one rendering of a transcript
    (
        "records",
        ["castdata.records", "castdata.messages", "castdata.rundir", "castdata.visible", "castdata.transcript"],
    ),
    ("report", ["castdata.report"]),  # pass^k of a run directory
    ("envs", ["castdata.envs"]),
    ("models", ["castdata.models"]),
    ("config", ["castdata.config"]),
    ("rollout", ["castdata.rollout"]),  # one episode, the episode loop both executors run
    ("scale", ["castdata.scale"]),  # the Ray executor
    ("label", ["castdata.label"]),
    ("builders", ["castdata.builders"]),
    ("hub", ["castdata.hub"]),
    ("critic", ["castdata.critic"]),  # the guard, the critics it opens, the critic's eval
    # `castdata collect`: picks the local executor or Ray's, guards the agent with the critic when there is one
    ("collect", ["castdata.rollout.collect"]),
    ("eval", ["castdata.critic.eval_policy"]),  # pass^k with and without the guard: two collections
    ("consumers", ["castdata.train", "castdata.imports", "castdata.view"]),
    ("entry points", ["castdata", "castdata.pipeline", "castdata.preflight", "castdata.cli"]),
]


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The castdata module an imported name lives in (`castdata.x.y.Thing` -> `castdata.x.y`)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name | ast.Attribute) and ast.unparse(node.test).endswith("TYPE_CHECKING")


def imports_of(module: str, path: Path) -> dict[str, int]:
    """The castdata modules `module` imports at run time (module-level or lazy), each with its first line."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: dict[str, int] = {}

    def add(name: str, line: int) -> None:
        target = _resolve(name)
        if target is not None and target != module:
            found.setdefault(target, line)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                add(full if full in MODULES else base, node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


GRAPH = {module: imports_of(module, path) for module, path in MODULES.items()}


def layer_of(module: str) -> int:
    """The index in LAYERS of the module's most specific pattern."""
    best: tuple[int, int] | None = None
    for index, (_, patterns) in enumerate(LAYERS):
        for pattern in patterns:
            inside = (
                module.startswith(pattern + ".") and pattern != "castdata"
            )  # the package `castdata` is its __init__
            if fnmatch.fnmatchcase(module, pattern) or inside:
                depth = pattern.count(".")
                if best is None or depth > best[0]:
                    best = (depth, index)
    assert best is not None, f"{module}: in no layer of LAYERS; add it where it belongs"
    return best[1]


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_the_walk_sees_lazy_imports_and_skips_type_checking_ones():
    graph = GRAPH["castdata.rollout.collect"]
    assert "castdata.scale.ray_executor" in graph, "the lazy import of the Ray executor counts"
    assert "castdata.critic.model" not in GRAPH["castdata.critic.guard"], "a TYPE_CHECKING import does not"
    assert cycles({"a": {"b": 1}, "b": {"c": 1}, "c": {"a": 1}, "d": {"a": 1}}) == [["a", "b", "c"]]


def test_no_import_cycle():
    found = cycles(GRAPH)
    detail = [" <-> ".join(component) for component in found]
    assert not found, "import cycles (break them; only TYPE_CHECKING imports may close one):\n" + "\n".join(detail)


def test_no_import_runs_up_a_layer():
    upward = [
        f"{MODULES[module].relative_to(ROOT)}:{line}: {module} ({LAYERS[layer_of(module)][0]}) imports "
        f"{target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in sorted(GRAPH.items())
        for target, line in sorted(targets.items(), key=lambda item: item[1])
        if layer_of(target) > layer_of(module)
    ]
    assert not upward, "imports up a layer (see LAYERS in tests/test_imports.py):\n" + "\n".join(upward)


def test_no_test_module_imports_another():
    """Shared helpers live in `tests/helpers/` (or `conftest.py` fixtures), never in a test module."""
    tests = ROOT / "tests"
    names = {path.stem for path in tests.glob("test_*.py")}
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            imported = []
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):  # also `from tests import test_x` and `from . import test_x`
                named = [alias.name for alias in node.names] if node.module in (None, "tests") else []
                imported = [node.module or "", *named]
            for name in imported:
                if name.rpartition(".")[2] in names:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {name}")
    assert not found, "\n".join(found)
