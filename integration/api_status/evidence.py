"""The H200 evidence: which public ops the GPU runs' result files (integration/h200/RUN/, each
run written up in docs/gpu-runs/RUN/) record as compiled with inductor, captured in a CUDA
graph and bit-identical to eager, per FlashInfer release.

A sweep line reads `SWEEP CASE PASS compiled+captured, bit-identical, ops: ...`; CASE is the
public name (`Class.run`, `sampling.softmax`), optionally with a variant in parentheses. The
release is the folder's (`.../0.7.2/...` or a file named `...-0.7.2-...`), else the one its
env.txt names. Runs "without" dynafold are the baseline, not evidence. Each file is cited by
its path from the repository root."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LINE = re.compile(r"^SWEEP (\S+?)(?:\(([^)]*)\))? (PASS compiled\+captured, bit-identical|FAIL)")
RELEASE = re.compile(r"(?:^|[-/])(\d+\.\d+\.\d+)(?:[-/.]|$)")
ENV = re.compile(r"flashinfer (\d+\.\d+\.\d+)")


def _release(path, runs):
    rel = os.path.relpath(path, runs)
    found = RELEASE.findall(rel.replace(".txt", "/").replace(".log", "/"))
    if found:
        return found[-1]
    env = os.path.join(os.path.dirname(path), "env.txt")
    if os.path.exists(env):
        with open(env) as f:
            m = ENV.search(f.read())
        return m.group(1) if m else None
    return None


def collect(runs):
    """{release: {public name: [evidence file, ...]}} of the run folders under `runs`."""
    out: dict[str, dict[str, list[str]]] = {}
    for root, _, files in os.walk(runs):
        for name in sorted(files):
            if not name.endswith((".txt", ".log")) or "without" in name:
                continue
            path = os.path.join(root, name)
            release = _release(path, runs)
            if release is None:
                continue
            passed: set[str] = set()
            failed: set[str] = set()
            with open(path, errors="replace") as f:
                for line in f:
                    m = LINE.match(line)
                    if m:
                        (failed if m.group(3) == "FAIL" else passed).add(m.group(1))
            # An op with several calls (its variants) is evidence only when none failed there.
            where = os.path.relpath(os.path.abspath(path), ROOT)
            for name in sorted(passed - failed):
                files_of = out.setdefault(release, {}).setdefault(name, [])
                if where not in files_of:
                    files_of.append(where)
    return out
