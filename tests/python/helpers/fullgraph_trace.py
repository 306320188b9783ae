"""One `torch.compile(fullgraph=True)` of a function, recording the graph Dynamo made, for the
trace helpers (trace_ops.py, trace_sampling.py)."""
import torch


def trace(fn, *args, error_chars):
    """(what the compiled function returned, {"ok": True, "targets": the graph's call targets})
    or (None, {"ok": False, "error": the exception, cut to `error_chars`})."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    try:
        result = torch.compile(fn, fullgraph=True, backend=backend)(*args)
    except Exception as e:
        return None, {"ok": False, "error": f"{type(e).__name__}: {e}"[:error_chars]}
    targets = [str(n.target) for g in graphs for n in g.graph.nodes if n.op == "call_function"]
    return result, {"ok": True, "targets": targets}
