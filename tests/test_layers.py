"""Imports follow the architecture: each layer imports only layers beneath it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Rank of each layer; a module may import only from layers of lower or equal rank.
LAYERS = [
    ("pallas.core", 0),
    ("pallas", 0),  # the package marker only; longer prefixes win
    ("pallas.config", 0),
    ("pallas.logs", 0),
    ("pallas.store", 1),
    ("pallas.platform", 1),
    ("pallas.providers", 1),
    ("pallas.product", 2),
    ("pallas.console", 3),
    ("pallas.features", 3),  # the one module that names the built-in features
    ("pallas.app", 4),
    ("pallas.__main__", 4),  # an entry point, like bot.py: `python -m pallas doctor`
    ("packages", 5),
    ("bot", 6),
]


def rank(module: str) -> int | None:
    matches = [
        (len(prefix), value)
        for prefix, value in LAYERS
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(matches)[1] if matches else None


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def sources() -> list[Path]:
    files = [*ROOT.glob("pallas/**/*.py"), *ROOT.glob("packages/**/*.py"), ROOT / "bot.py"]
    return [f for f in files if "migrations" not in f.parts]


def test_no_module_imports_a_layer_above_it() -> None:
    violations = []
    for path in sources():
        own = rank(module_name(path))
        assert own is not None, f"{path} belongs to no layer"
        for name in imported(ast.parse(path.read_text(encoding="utf-8"))):
            other = rank(name)
            if other is not None and other > own:
                violations.append(f"{module_name(path)} imports {name}")
    assert violations == []


def test_core_imports_nothing_of_ours_but_core() -> None:
    for path in ROOT.glob("pallas/core/**/*.py"):
        for name in imported(ast.parse(path.read_text(encoding="utf-8"))):
            assert not name.startswith(("pallas.", "packages")) or name.startswith("pallas.core"), (
                f"{path.name} imports {name}"
            )


# The deliberate exceptions: Alembic (about 10 MB of modules) is loaded only when the store
# actually needs migrating, so a bot whose store is current never carries it.
# numpy, likewise, only once an embedding model is configured and answering; Pillow once a
# picture is checked.
LAZY_IMPORTS = {("migrate.py", "alembic"), ("restore.py", "alembic"), ("vectors.py", "numpy"),
                ("media.py", "PIL")}


def test_imports_are_at_module_level() -> None:
    nested = []
    for path in sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                nested += [
                    f"{path.name}:{n.lineno}"
                    for n in ast.walk(node)
                    if isinstance(n, ast.Import | ast.ImportFrom)
                    and not _allowed_lazy(path.name, n)
                ]
    assert nested == []


def _allowed_lazy(file_name: str, node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.ImportFrom):
        names = [node.module or ""]
    else:
        names = [alias.name for alias in node.names]
    return all((file_name, name.split(".")[0]) in LAZY_IMPORTS for name in names)


SENDING_NAMES = {"send", "finish", "call_api", "send_and_record", "poke_and_record", "send_message"}
SENDING_MODULES = ("pallas.platform.onebot.send", "pallas.platform.onebot.outlet")


def test_no_plugin_package_sends_to_the_platform_itself() -> None:
    """Everything the bot says or does goes through the outbox (docs/delivery.md)."""
    offenders = []
    for path in ROOT.glob("packages/**/*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name in imported(tree):
            if name.startswith(SENDING_MODULES):
                offenders.append(f"{path.relative_to(ROOT)} imports {name}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in SENDING_NAMES:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} uses .{node.attr}")
    assert offenders == []


# Features on the seam (docs/architecture.md, "Adding a feature"), and the one module that
# lists them. Each grows as a feature moves onto the seam.
SEAM_FEATURES = (
    "pallas.product.deterministic",
    "pallas.product.memory",
    "pallas.product.media",
    "pallas.product.persona",
)
FEATURE_LIST = "pallas.features"


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_a_feature_is_imported_only_by_itself_and_the_feature_list() -> None:
    violations = []
    for path in sources():
        own = module_name(path)
        for name in imported(ast.parse(path.read_text(encoding="utf-8"))):
            for feature in SEAM_FEATURES:
                allowed = _inside(own, feature) or own == FEATURE_LIST
                if _inside(name, feature) and not allowed:
                    violations.append(f"{own} imports {name}")
    assert violations == []
