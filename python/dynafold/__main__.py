"""`python -m dynafold ARGS`: execs the `dynafold` command installed with this package,
pointing `run` and `doctor` at the libraries bundled here."""
import importlib.metadata
import os
import sys

from dynafold import PRELOAD

WITH_LIB = ("run", "doctor")


def binary():
    """The `dynafold` executable this distribution installed (its RECORD says where: bin/ of
    a venv, ~/.local/bin, a --prefix...)."""
    try:
        files = importlib.metadata.distribution("dynafold").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for f in files:
        if f.name == "dynafold" and f.parent.name in ("bin", "scripts", "Scripts"):
            path = str(f.locate())
            if os.access(path, os.X_OK):
                return path
    sys.exit("dynafold: the dynafold command of this package is missing; reinstall it (pip install --force-reinstall dynafold)")


def argv(args):
    # Subcommand options end at `--`; a --lib after it belongs to the wrapped command.
    head = args[: args.index("--")] if "--" in args else args
    if (args and args[0] in WITH_LIB and "--lib" not in head
            and not any(a.startswith("--lib=") for a in head) and "DYNAFOLD_LIB" not in os.environ):
        return [args[0], "--lib", PRELOAD, *args[1:]]
    return list(args)


def main():
    exe = binary()
    os.execv(exe, [exe, *argv(sys.argv[1:])])


if __name__ == "__main__":
    main()
