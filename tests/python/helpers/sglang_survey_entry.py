"""SGLang's own compile entry, `install_torch_compiled` (fullgraph=True, its default), over a small
block whose forward has two graph breaks, on CPU; prints one `RESULT {...}` line. Run by
test_sglang059.py, test_sglang0512.py and test_sglang.py in each release's environment (0.5.9:
torch 2.9.1, 0.5.12: 2.11.0, 0.5.23: 2.14.1), with dynafold's preload and survey mode on or off.

    python sglang_survey_entry.py

SGLang's entry is unmodified; it compiles only inside its release's switch (0.5.9
`set_compiled(True)`, 0.5.12 `enable_piecewise_cuda_graph()`, 0.5.23
`enable_tc_piecewise_cuda_graph()`). The backend is SGLang's `backend_factory` hook given a
function that runs each graph as Dynamo made it (SGLang's own backend needs a process group and
its split op, which test_sglang*.py's other cases drive). Stand-ins, as in the other runners
(helpers/sglang_standins.py): 1. `IPython.display`; 2. SGLang's `weak_ref_tensor` module (it
raises at import without CUDA).
"""
import contextlib
import importlib
import json
import sys

import sglang_standins as standins

standins.ipython_display()
for name in ("sglang.srt.compilation.weak_ref_tensor",
             "sglang.srt.model_executor.runner_backend_utils.weak_ref_tensor"):
    standins.weak_ref_tensor(name)

import torch  # noqa: E402

import sglang  # noqa: E402
from sglang.srt.compilation import compile as sglang_compile  # noqa: E402

# Each release's switch that makes the installed forward run compiled.
SWITCHES = (
    ("sglang.srt.compilation.compile", "set_compiled"),
    ("sglang.srt.compilation.piecewise_context_manager", "enable_piecewise_cuda_graph"),
    ("sglang.srt.model_executor.runner_backend_utils.tc_piecewise_cuda_graph",
     "enable_tc_piecewise_cuda_graph"),
)


def switch():
    for module, name in SWITCHES:
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
    raise RuntimeError("no compile switch in this SGLang")


class Block(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + 1
        print("block")  # a graph break
        x = x * 2
        return x + x.sum().item()  # another


def main():
    graphs = []

    def backend_factory(gm, example_inputs):
        graphs.append(len(list(gm.graph.nodes)))
        return gm.forward

    block = Block()
    x = torch.ones(4, 8)
    eager = block(x)
    sglang_compile.install_torch_compiled(block, dynamic_arg_dims={}, backend_factory=backend_factory)
    result = {"sglang": sglang.__version__, "torch": torch.__version__, "ok": False}
    try:
        with switch()():
            out = block(x)
        result.update(ok=True, equal_to_eager=bool(torch.equal(out, eager)), graphs=len(graphs))
    except Exception as e:  # the test reads what stopped the compile
        result["error"] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    print("RESULT " + json.dumps(result))
    sys.stdout.flush()


with contextlib.suppress(BrokenPipeError):
    main()
