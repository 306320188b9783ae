"""The README says what the tool does, checked against the tool (issue 41): a sample of output is
compared with real output, a claim about the built files with the files, a figure with what
docs/evidence.md says was done. A README change that the tool does not bear out fails here."""
import re
import subprocess
import sys

from conftest import DYNAFOLD, PRELOAD, ROOT, clean_env, run
from test_fold import flashinfer_path

README = ROOT / "README.md"
# glibc's own libraries (before 2.34 libpthread and libdl were separate files); its loader,
# ld-linux, is told apart by name.
GLIBC = {"libc.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libm.so.6"}
# The README's doctor sample: a fake nvcc under this CUDA_HOME, FlashInfer 0.7.4, the main
# test environment's torch (its site-packages shown as a venv's would be).
SAMPLE_CUDA_HOME = "/opt/cuda-12.8"
SAMPLE_SITE = ".venv/lib/python3.11/site-packages"
SAMPLE_RELEASE = "0.7.4"


def readme_section(title):
    return README.read_text().split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def sections(text):
    """{title: [line, ...]} of a doctor report: a title is a line that starts in column 0,
    its lines those indented under it, each with its runs of spaces made one."""
    out, current = {}, None
    for line in text.splitlines():
        if line and not line.startswith(" "):
            current = out.setdefault(line, [])
        elif line.strip() and current is not None:
            current.append(" ".join(line.split()))
    return out


def test_the_doctor_sample_is_what_doctor_prints(tmp_path):
    """Issue 41, item 6: the README's sample is real output of this dynafold. Each section it
    shows is one doctor prints, in doctor's order, with doctor's lines: all of them, in order,
    or, where the sample ends a section with `...`, some of them, in order. Only the fake
    toolkit's folder, torch's site-packages and the library's path are written as a user's
    would read them."""
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "bin" / "nvcc").write_text('#!/bin/sh\necho "Cuda compilation tools, release 12.8, V12.8.93"\n')
    (cuda / "bin" / "nvcc").chmod(0o755)
    env = clean_env(PATH="/usr/bin:/bin", CUDA_HOME=str(cuda), PYTHONPATH=flashinfer_path(SAMPLE_RELEASE))
    env.pop("CUDA_PATH", None)
    r = run([str(DYNAFOLD), "doctor", "--python", sys.executable], env, timeout=300)
    real = r.stdout.decode()
    assert r.returncode == 0, real + r.stderr.decode()
    torch_site = subprocess.run([sys.executable, "-c", "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))"],
                                capture_output=True, timeout=120).stdout.decode().strip()
    real = (real.replace(str(cuda), SAMPLE_CUDA_HOME).replace(torch_site, SAMPLE_SITE)
            .replace(str(PRELOAD.resolve()), f"{SAMPLE_SITE}/dynafold/libdynafold.so"))
    block = re.search(r"\n```\n(.*?)```\n", readme_section("`dynafold doctor`"), re.S)
    assert block, "the README's doctor section has no sample"
    shown, printed = sections(block.group(1)), sections(real)
    assert list(shown) == [t for t in printed if t in shown], (list(shown), list(printed))
    for title, lines in shown.items():
        if lines[-1:] == ["..."]:
            left = iter(printed[title])
            agree = all(any(line == real_line for real_line in left) for line in lines[:-1])
        else:
            agree = lines == printed[title]
        assert agree, f"README sample, {title}:\n" + "\n".join(f"  {line}" for line in printed[title])


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


def test_no_performance_figure_times_fp4_work_the_h200_did_not_do():
    """Issue 41, item 10: on the H200 FlashInfer's fp4 kernel writes nothing (docs/evidence.md),
    so a ratio timed there is not an FP4 speed-up: every figure measured there with the fp4
    kernel in it says so in its own row."""
    assert "writes nothing on an H200" in " ".join((ROOT / "docs" / "evidence.md").read_text().split())
    tables = {"README.md": readme_section("Performance"),
              "docs/performance.md": (ROOT / "docs" / "performance.md").read_text()}
    rows = [(name, line) for name, text in tables.items() for line in text.splitlines()
            if line.startswith("|") and "H200" in line and "fp4 block" in line.lower()]
    assert rows, "no FP4 row on the H200: the test reads the wrong tables"
    for name, row in rows:
        assert "writes nothing" in row and "overhead" in row, f"{name}: {row}"
        assert "**" not in row.split("|")[2], f"{name}: the figure is set in bold as a win: {row}"
