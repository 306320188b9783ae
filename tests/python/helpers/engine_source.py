"""The op engine (hooks/ops/, package `_dynafold_ops`) imported from the source tree, for tests
that read its data or call its pure parts without the library loaded. In a process the library
is loaded into, the embedded package already answers and is used as it is."""
import importlib
import importlib.util
import pathlib
import sys

OPS = pathlib.Path(__file__).resolve().parents[3] / "hooks" / "ops"


def engine(name):
    """The engine's module `name` (`engine.fakes`, `mechanisms.partial_methods`, ...)."""
    if "_dynafold_ops" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "_dynafold_ops", OPS / "__init__.py", submodule_search_locations=[str(OPS)])
        package = importlib.util.module_from_spec(spec)
        sys.modules["_dynafold_ops"] = package
        spec.loader.exec_module(package)
    return importlib.import_module(f"_dynafold_ops.{name}")


def module_names():
    """Every module of the engine by name, as the library embeds them (src/python/build.rs):
    each `.py` under hooks/ops, named from `_dynafold_ops`, a package by its folder."""
    return [".".join(("_dynafold_ops",) + tuple(
        p for p in path.relative_to(OPS).with_suffix("").parts if p != "__init__"))
        for path in OPS.rglob("*.py")]
