"""`python -m dynafold ARGS`: execs the `dynafold` command installed with this package,
pointing `run` and `doctor` at the libraries bundled here."""
import importlib.metadata
import os
import sys

from dynafold import LIB_DIR, PRELOAD

WITH_LIB = ("run", "doctor")


def binary():
    """The `dynafold` executable this distribution installed: where its RECORD says (bin/ of
    a venv, ~/.local/bin, a --prefix...), else DIR/bin beside this package, where
    `pip install --target DIR` puts it (there the RECORD names it relative to the temporary
    prefix pip installed into before moving the files to DIR, a path that does not exist)."""
    try:
        files = importlib.metadata.distribution("dynafold").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    candidates = [str(f.locate()) for f in files
                  if f.name == "dynafold" and f.parent.name in ("bin", "scripts", "Scripts")]
    candidates.append(os.path.join(os.path.dirname(LIB_DIR), "bin", "dynafold"))
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    sys.exit("dynafold: the dynafold command of this package is missing; reinstall it (pip install --force-reinstall dynafold)")


def argv(args):
    # Subcommand options end at `--`; a --lib after it belongs to the wrapped command. An
    # empty DYNAFOLD_LIB is an unset one: the bundled library is still the one to use.
    head = args[: args.index("--")] if "--" in args else args
    if (args and args[0] in WITH_LIB and "--lib" not in head
            and not any(a.startswith("--lib=") for a in head) and not os.environ.get("DYNAFOLD_LIB")):
        return [args[0], "--lib", PRELOAD, *args[1:]]
    return list(args)


def main():
    exe = binary()
    os.execv(exe, [exe, *argv(sys.argv[1:])])


if __name__ == "__main__":
    main()
