"""Gives every public tensor op of the FlashInfer on sys.path a status, in one process, and
writes it as JSON: python trace_all.py OUT.json [--only NAME,...] [--timeout S].

Run with dynafold's preload (scripts/api-status does). Each op with an argument builder is
compiled with torch.compile(fullgraph=True) on fake CUDA tensors, the device answered as an
H200 (sm90); one that fails there is tried again as an SM100 (standins.py), for the ops
FlashInfer builds for Blackwell only, and one whose SM100 attempt FlashInfer's own device
check refuses naming only SM120/SM121 or SM110 once more as that device (EXTRA_DEVICES). Ops under a rule (verdicts.py) get its status; a
by-design op with a builder is traced all the same, and its own error is kept as evidence.
"""
import argparse
import json
import os
import re
import signal
import sys
import time
import typing

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
import flashinfer  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

import public_api  # noqa: E402
import reasons  # noqa: E402
import standins  # noqa: E402
import verdicts  # noqa: E402
from builders import BUILDERS  # noqa: E402
from trace_all_keys import builder_key  # noqa: E402


class OpTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise OpTimeout("the trace ran past its time limit")


def first_line(e):
    # Addresses (`<function f at 0x7f...>`) differ per run; the tables are compared and diffed.
    text = re.sub(r" at 0x[0-9a-f]+", "", f"{type(e).__name__}: {e}").strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    head = lines[0] if lines else type(e).__name__
    # Dynamo's own first line is often just "Unsupported method call"; its explanation says
    # which call, so keep it with the first line.
    if len(lines) > 1 and lines[1].startswith("Explanation:"):
        head = f"{head} ({lines[1][len('Explanation:'):].strip()})"
    # "Observed exception": the exception FlashInfer's Python raised is in the debug context.
    raised = next((ln for ln in lines if ln.startswith("Developer debug context: raised "
                                                     "exception")), None)
    if raised:
        head = f"{head[:120]}: {raised[len('Developer debug context: raised exception'):].strip()}"
    return head[:400]


def frames(e):
    """The frames of the traced user code the error names (Dynamo's "from user code:"
    stack) as `file.py:function`, outermost first: where FlashInfer's Python stopped, for
    reasons.py."""
    text = str(e)
    if "from user code:" not in text:
        return []
    stack = text.split("from user code:", 1)[1]
    return [f"{os.path.basename(path)}:{fn}" for path, fn in
            re.findall(r'^\s*File "([^"]*)", line \d+, in (\S+)', stack, re.M)]


def _leaves(result):
    if isinstance(result, torch.Tensor):
        return [[list(result.shape), str(result.dtype).replace("torch.", "")]]
    if isinstance(result, (tuple, list)):
        return [leaf for r in result for leaf in _leaves(r)]
    return []


def trace_once(fn, args, timeout):
    """{"ok", "targets", "results"} or {"ok": False, "error"}."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    signal.alarm(timeout)
    try:
        result = torch.compile(fn, fullgraph=True, backend=backend)(*args)
    except BaseException as e:  # the status is the error: keep going with the next op
        if isinstance(e, KeyboardInterrupt):
            raise
        return {"ok": False, "error": first_line(e), "frames": frames(e)}
    finally:
        signal.alarm(0)
    targets = sorted({str(n.target) for g in graphs for n in g.graph.nodes
                      if n.op == "call_function"})
    return {"ok": True, "targets": targets, "results": _leaves(result)}


def check_fake(fn, args, traced):
    """FlashInfer's own shape arithmetic against the traced operators' fakes: the call run
    eagerly on the same fake tensors with the kernels returning nothing (standins.py), so
    FlashInfer's Python allocates the results itself; its (shape, dtype) leaves must equal
    the compiled call's."""
    loaded = set(sys.modules)
    try:
        try:
            with standins.eager_shape_run():
                eager = _leaves(fn(*args))
        except Exception:
            if not {m for m in set(sys.modules) - loaded if m.startswith("flashinfer")}:
                raise
            # The call imported FlashInfer modules of its own (a kernel module imported in
            # the function body), after the run's stand-ins were put in: once more, with them.
            with standins.eager_shape_run():
                eager = _leaves(fn(*args))
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        return {"fake_check": "not checked", "why": first_line(e)[:200]}
    if not eager and traced:
        return {"fake_check": "not checked",
                "why": "the kernel returns the result itself (FlashInfer allocates none)"}
    if eager == traced:
        return {"fake_check": "agrees"}
    return {"fake_check": "differs", "eager": eager}


def eager_error(fn, args):
    """Where FlashInfer's Python, run eagerly on the same fake tensors, stops: the first JIT
    kernel it reaches (the stand-in raises, naming it) or its own error."""
    try:
        with standins.eager_shape_run(kernels_return=False):
            fn(*args)
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        return first_line(e)
    return None


def _calls(build, timeout):
    """The builder's calls, made under fake mode: {label: (fn, args)}."""
    signal.alarm(timeout)
    try:
        made = build(_tensor, flashinfer)
    finally:
        signal.alarm(0)
    return made if isinstance(made, dict) else {"": made}


def _tensor(*shape, dtype=torch.bfloat16):
    return torch.empty(*shape, device="cuda", dtype=dtype)


# FlashInfer's device refusals that name only a device neither first stand-in is (the error
# of the SM100 attempt): that device is tried last, for these ops only.
EXTRA_DEVICES = (
    # (0.7.x's SM12x MoE GEMMs refuse a DSL that does not target SM120/SM121 naming their
    # op class, CuteDslSm120...Op, "unsupported".)
    (120, re.compile(r"SM12x|SM120|\[120, 121\]|compute capabilit(y|ies) 12|"
                     r"CuteDslSm120\w*Op: unsupported")),
    (110, re.compile(r"SM110|sm110|compute capability 11\.0")),
)


def _named_device(outcome):
    errors = " ".join(c["error"] for c in outcome["calls"].values() if not c["ok"])
    return next((sm for sm, pattern in EXTRA_DEVICES if pattern.search(errors)), None)


# (FlashInfer's supported_compute_capability refusal lists the SM100 family alone as
# "supported compute capabilities: [100, 103, 107]": 0.7.x's paged MQA logits.)
SM100_ONLY = re.compile(r"SM10[\dx]|compute capability 10\.\d|requires SM100|Blackwell|"
                        r"supported compute capabilities: \[10\d(, 10\d)*\]|"
                        # the CuTe DSL's target with no device to detect (0.7.4's GDN decode)
                        r"compiles this process for sm_10\da")
# FlashInfer's backend checks refusing the device answered without naming another
# (backend_requirement's "does not support backend 'X' with capability 90", "does not support
# compute capability 100", its auto selection finding none): the next stand-in is tried.
REFUSES = re.compile(r"(?:with|compute) capability (\d+)\b|No suitable auto backends found|"
                     r"backend '\w+' is not available on cuda")
NEXT_DEVICE = {90: 100, 100: 120, 120: 110}


def _refusing_device(why, sm):
    """The device FlashInfer's eager device check names in `why` (it refused `sm`), the next
    stand-in where it names none, or None where `why` is no device refusal."""
    named = _named_device({"calls": {"": {"ok": False, "error": why}}})
    if named is None and sm == 90 and SM100_ONLY.search(why):
        named = 100
    refused = REFUSES.search(why)
    if named is None and refused and refused.group(1) in (None, str(sm)):
        named = NEXT_DEVICE.get(sm)
    return named


def try_op(build, timeout):
    """Traces every call of the op as an H200, then (if any failed) as an SM100, then (if
    FlashInfer refused that naming SM120 or SM110 only) as that device."""
    attempts = []
    devices = [90, 100]
    for sm in devices:
        standins.answer_as(sm)
        outcome: dict[str, typing.Any] = {"sm": sm, "calls": {}}
        try:
            calls = _calls(build, timeout)
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            outcome["calls"]["(arguments)"] = {"ok": False, "error": first_line(e)}
            calls = {}
        for label, (fn, args) in calls.items():
            traced = trace_once(fn, args, timeout)
            signal.alarm(timeout)
            try:
                if traced["ok"]:
                    traced.update(check_fake(fn, args, traced["results"]))
                    named, tried = _refusing_device(traced.get("why", ""), sm), {sm}
                    while traced["fake_check"] == "not checked" and named not in tried | {None}:
                        # Traced through an operator that holds FlashInfer's device check:
                        # its own Python refuses this device eagerly, so its allocation is
                        # read as the device it names (or the next one, where it names none).
                        tried.add(named)
                        standins.answer_as(named)
                        traced.pop("why", None)
                        try:
                            traced.update(check_fake(fn, args, traced["results"]))
                        finally:
                            standins.answer_as(sm)
                        named = _refusing_device(traced.get("why", ""), named)
                else:
                    traced["eager"] = eager_error(fn, args)
            except OpTimeout:
                pass
            finally:
                signal.alarm(0)
            outcome["calls"][label or "call"] = traced
        outcome["ok"] = bool(calls) and all(c["ok"] for c in outcome["calls"].values())
        attempts.append(outcome)
        if outcome["ok"]:
            break
        if sm == 100 and _named_device(outcome):
            devices.append(_named_device(outcome))
    standins.answer_as(90)
    return attempts


def _as_an_h200(attempts):
    """For an op that traced only as an SM100: what stopped it as an H200, so the table can
    tell FlashInfer refusing the device from a break a Hopper GPU has too."""
    if len(attempts) < 2:
        return {}
    errors = [c["error"] for c in attempts[0]["calls"].values() if not c["ok"]]
    eager = [c.get("eager") for c in attempts[0]["calls"].values() if c.get("eager")]
    if not errors:
        return {}
    return {"sm90_error": errors[0], "sm90_reason": reasons.reason(errors[0], eager)}


def status_of(name, entry, timeout):
    rule = verdicts.verdict(name, entry)
    key = builder_key(name, entry["kind"])
    row = {"module": entry["module"], "kind": entry["kind"]}
    found = BUILDERS.get(key)
    if rule is not None and rule[0] == "out of scope":
        return {**row, "status": "out of scope", "reason": rule[1]}
    if found is None:
        if rule is not None:
            return {**row, "status": rule[0], "reason": rule[1], "confirmed": False}
        return {**row, "status": "untried", "reason": "no argument builder yet"}
    family, build = found
    started = time.monotonic()
    attempts = try_op(build, timeout)
    row.update(family=family, seconds=round(time.monotonic() - started, 1))
    last = attempts[-1]
    h200 = _as_an_h200(attempts)
    if last["ok"] and reasons.breaks_on_a_gpu(h200.get("sm90_reason")):
        # Traced as an SM100 only, past a break that a Hopper GPU has too (not FlashInfer
        # refusing the device): it fails where SGLang runs it on an H200.
        return {**row, "status": "fails", "error": h200["sm90_error"],
                "reason": f"as an H200: {h200['sm90_reason']}; as an SM{last['sm']} it traces "
                          "(another kernel path)", "sm100_traces": True}
    if last["ok"]:
        calls = last["calls"]
        ops = sorted({t for c in calls.values() for t in c["targets"]
                      if t.startswith("dynafold_flashinfer.")})
        checks = {k: c["fake_check"] for k, c in calls.items()}
        verdict = ("differs" if "differs" in checks.values() else
                   "agrees" if set(checks.values()) == {"agrees"} else
                   "partly checked" if "agrees" in checks.values() else "not checked")
        return {**row, "status": "fake", "sm": last["sm"], "operators": ops,
                "results": {k: c["results"] for k, c in calls.items()},
                "fake_check": verdict,
                "fake_checks": {k: {f: c[f] for f in ("fake_check", "why", "eager") if f in c}
                                for k, c in calls.items()},
                **({"note": f"the rule said {rule[0]} ({rule[1]}); it traced"} if rule else {}),
                **h200}
    errors = {f"sm{a['sm']} {label}": c["error"] for a in attempts
              for label, c in a["calls"].items() if not c["ok"]}
    where = {f"sm{a['sm']} {label}": c.get("frames", []) for a in attempts
             for label, c in a["calls"].items() if not c["ok"]}
    first = next(iter(errors.values()))
    eager = [c.get("eager") for a in attempts for c in a["calls"].values() if c.get("eager")]
    if rule is not None:
        # Confirmed only by a trace that failed: not by arguments this machine could not make
        # (0.7.2's MiniMax-H3 MXFP8 op launches while it is constructed, which needs the driver).
        traced = [e for k, e in errors.items() if not k.endswith("(arguments)")]
        return {**row, "status": rule[0], "reason": rule[1], "confirmed": bool(traced),
                "error": traced[0] if traced else first}
    # The latest device's error first: past the sm90 refusal, sm100 says what stops it there.
    named = next((r for r in (reasons.reason(errors[k], eager, where[k], op=name)
                              for k in reversed(list(errors))) if r), None)
    if named and all(k.endswith("(arguments)") for k in errors):
        named = f"making the call's arguments (its plan() on this machine): {named}"
    return {**row, "status": "fails", "error": first, "errors": errors,
            **({"eager": eager[0]} if eager else {}),
            **({"reason": named} if named else {})}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--only", default="")
    # Per op. A CuTe DSL compile traced on a loaded 2-core machine took past 60 s, and the
    # alarm raised inside the DSL's MLIR callbacks aborts the whole process (2026-12-02).
    parser.add_argument("--timeout", type=int, default=180)
    opts = parser.parse_args()
    if "_dynafold_ops.engine.wake" not in sys.modules:
        sys.exit("trace_all.py: dynafold's preload is not active (run it through scripts/api-status)")
    standins.install()
    signal.signal(signal.SIGALRM, _alarm)
    ops = public_api.enumerate_ops(flashinfer)
    standins.install()  # again, for the submodules enumerating imported
    only = {n for n in opts.only.split(",") if n}
    table = {}
    # The count first: `doctor --ops` (src/cli/live_table.rs) says "12/250" as each op ends.
    print(f"tracing {len(only & set(ops)) if only else len(ops)} public ops", file=sys.stderr,
          flush=True)
    with FakeTensorMode(allow_non_fake_inputs=True):
        for name, entry in ops.items():
            if only and name not in only:
                continue
            table[name] = status_of(name, entry, opts.timeout)
            print(f"{table[name]['status']:<13} {name}", file=sys.stderr, flush=True)
    out = {"flashinfer": flashinfer.__version__, "torch": torch.__version__.split("+")[0],
           "ops": table}
    with open(opts.out, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")


main()
