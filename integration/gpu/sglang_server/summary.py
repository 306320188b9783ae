"""summary.json for the GPU server runs (issue 37), from the folders sglang_server.sh wrote:
    python3 summary.py [--configs a,b,c] RUNS_DIR...  > summary.json
Each RUNS_DIR holds env.txt and CONFIG-MODE/ folders; a configuration's later folder wins.
`tokens_equal` compares a run's greedy output ids with its configuration's other mode;
`graphs_captured` reads SGLang's own log lines; `flashinfer_ops_traced` lists what the graphs
SGLang and inductor wrote call from FlashInfer (`torch.ops.flashinfer.*`, `flashinfer.*`)."""
import json
import pathlib
import re
import sys

FI_CALL = re.compile(r"torch\.ops\.flashinfer\.\w+|\bflashinfer(?:\.\w+)+")
OPS = re.compile(r"torch\.ops\.\w+\.\w+")
DYNAFOLD_PID = re.compile(r"dynafold\[\d+\]")
DYNAFOLD_LINE = re.compile(r"\s*dynafold\[\d+\] (INFO|WARN)")
CAPTURE = {"decode": "Capture cuda graph end", "piecewise": "Capture piecewise CUDA graph end"}


def read_json(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def graphs(run):
    fi, ops = set(), set()
    for f in (run / "graphs").glob("*"):
        text = f.read_text(errors="replace")
        fi.update(FI_CALL.findall(text))
        ops.update(OPS.findall(text))
    return sorted(fi), sorted(ops)


def one(run):
    config, mode = run.name.split("-", 1)
    log = (run / "server.log").read_text(errors="replace") if (run / "server.log").exists() else ""
    load = read_json(run / "load.json") or {}
    fi, ops = graphs(run)
    return {
        "config": config, "dynafold": mode == "dynafold",
        "rc": int((run / "rc").read_text()) if (run / "rc").exists() else None,
        "graphs_captured": {k: v in log for k, v in CAPTURE.items()},
        "capture_lines": [line.strip()[:200] for line in log.splitlines()
                          if any(v in line for v in CAPTURE.values())],
        "failed_requests": load.get("failed_requests"), "requests": load.get("requests"),
        "tok_s": load.get("tok_s"), "ttft_ms": load.get("ttft_ms"), "itl_ms": load.get("itl_ms"),
        "flashinfer_ops_traced": fi, "ops_in_graphs": ops,
        "dynafold_log": sorted({DYNAFOLD_PID.sub("dynafold[pid]", line.strip())[:240]
                                for line in log.splitlines() if DYNAFOLD_LINE.match(line)}),
        "startup_s": int((run / "startup_s").read_text()) if (run / "startup_s").exists() else None,
        "_greedy": (read_json(run / "greedy.json") or {}).get("output_ids"),
    }


def main(argv):
    configs = None
    if argv[:1] == ["--configs"]:
        configs, argv = set(argv[1].split(",")), argv[2:]
    dirs, runs, env = argv, {}, ""
    for d in map(pathlib.Path, dirs):
        env = (d / "env.txt").read_text() if (d / "env.txt").exists() else env
        for run in sorted(p for p in d.iterdir() if p.is_dir() and "-" in p.name):
            if configs is None or run.name.split("-")[0] in configs:
                runs[run.name] = one(run)
    versions = dict(re.findall(r"(torch|flashinfer|sglang|sgl_kernel) (\S+)", env))
    for r in runs.values():
        other = runs.get(f"{r['config']}-{'plain' if r['dynafold'] else 'dynafold'}")
        mine, theirs = r["_greedy"], other and other["_greedy"]
        r["tokens_equal"] = None if not (mine and theirs) else mine == theirs
    ratios = {}
    for r in runs.values():
        plain = runs.get(f"{r['config']}-plain")
        if r["dynafold"] and plain:
            keys = [k for k in ("tok_s", "ttft_ms", "itl_ms") if r.get(k) and plain.get(k)]
            ratios[r["config"]] = {k: round(r[k] / plain[k], 3) for k in keys}
    gpu = next((line.split(",")[0] for line in env.splitlines() if "NVIDIA" in line), None)
    print(json.dumps({
        "gpu": gpu, "sglang": versions.get("sglang"), "torch": versions.get("torch"),
        "flashinfer": versions.get("flashinfer"), "sgl_kernel": versions.get("sgl_kernel"),
        "runs": [{k: v for k, v in r.items() if not k.startswith("_")} for r in runs.values()],
        "ratios_dynafold_over_plain": ratios,
    }, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
