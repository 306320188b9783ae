"""The README says what the tool does, checked against the tool (issue 41): a sample of output is
compared with real output, a claim about the built files with the files, a figure with what
docs/evidence.md says was done. A README change that the tool does not bear out fails here."""
import re
import subprocess

from conftest import PRELOAD, ROOT

README = ROOT / "README.md"
# glibc's own libraries (before 2.34 libpthread and libdl were separate files); its loader,
# ld-linux, is told apart by name.
GLIBC = {"libc.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libm.so.6"}


def needed(path):
    r = subprocess.run(["readelf", "-d", str(path)], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", r.stdout.decode()))


def test_the_readme_names_what_the_preload_library_needs():
    """Issue 41, item 4: the README said `libdynafold.so` "depends on libc only"; the cargo
    build's needs `libgcc_s.so.1`. Its row names every library outside glibc the built file
    needs, and the file needs nothing else (the wheel's: test_package.py, glibc only)."""
    row = next(line for line in README.read_text().splitlines() if line.startswith("| `libdynafold.so` |"))
    outside = {n for n in needed(PRELOAD) if not n.startswith("ld-linux")} - GLIBC
    assert outside <= {"libgcc_s.so.1"}, outside
    for name in outside:
        assert f"`{name}`" in row, (name, row)
    assert "libc only" not in row, row
