"""Compiled equals eager, on values, for per_token_group_quant_8bit's cuTile backend (0.7.x):
FlashInfer's public function and its cuTile body as shipped, the one cuTile launch
(`ct.launch`) replaced by a CPU stand-in that writes what its two kernels write (read from
per_token_group_quant_8bit_cutile.py: each program one group, its scale into `x_s` and its
quantized values into `x_q`, reading only `x`). Compiled with real inductor, `fullgraph=True`,
static and with the token dimension dynamic, for each scale layout. Prints one JSON line: per
case and mode, whether it compiled, through which operators, and whether results and the
input equal eager's."""
import importlib

import torch

import cuda.tile as ct
import flashinfer  # noqa: F401  (the package's own imports, as a user's program makes them)
from flashinfer import quantization
from value_compare import clone, compare_cases, print_result, same

CUTILE = "flashinfer.quantization.kernels.cutile.per_token_group_quant_8bit_cutile"


def _launch(stream, grid, kernel, args):
    """Both kernels of per_token_group_quant_8bit_cutile.py on the CPU: the row-major one
    (12 arguments) and the column-major one (15), by their own index arithmetic."""
    if len(args) == 12:
        x, x_q, x_s, _stride, n, eps, lo, hi = args[:8]
        groups, size, ue8m0 = x.view(-1, n).float(), n, False
    else:
        x, x_q, x_s, size, columns, _row_stride, col_stride, eps, lo, hi, ue8m0 = args[:11]
        groups = x.view(-1, columns // size, size).float()
    scale = groups.abs().amax(-1).clamp_min(eps) / hi
    if ue8m0:
        scale = torch.exp2(torch.ceil(torch.log2(scale.abs().clamp_min(1e-10))))
    values = (groups / scale.unsqueeze(-1)).clamp(lo, hi)
    if x_q.dtype == torch.int8:
        values = torch.floor(values + 0.5)
    x_q.copy_(values.to(x_q.dtype).reshape(-1))
    if len(args) == 12:
        x_s.copy_(scale.reshape(-1))
    else:
        # scale[row, group] at group * col_stride + row
        rows = scale.shape[0]
        x_s.view(-1, col_stride)[:, :rows].copy_(scale.t())


ct.launch = _launch
# The cuTile launch takes the current stream's handle; no CUDA here, and the stand-in needs none.
torch.cuda.current_stream = lambda device=None: None


def case(**options):
    def f(x):
        return quantization.per_token_group_quant_8bit(x, 128, backend="cutile", **options)
    return f


CASES = {
    "row_major": case(),
    "row_major_int8": case(dst_dtype=torch.int8),
    "column_major": case(column_major_scales=True),
    "column_major_tma_ue8m0": case(column_major_scales=True, scale_tma_aligned=True,
                                   scale_ue8m0=True),
}


def compare(fn, dynamic):
    x = torch.randn(37, 512, dtype=torch.bfloat16) * 3
    eager_x = clone(x)
    eager = fn(eager_x)
    compiled_x = clone(x)
    if dynamic:
        torch._dynamo.mark_dynamic(compiled_x, 0)
    torch._dynamo.reset()
    graphs = []

    def backend(gm, inputs):
        graphs.append(gm)
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, inputs)

    try:
        got = torch.compile(fn, fullgraph=True, backend=backend)(compiled_x)
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:1500]}
    operators = sorted({str(n.target) for g in graphs for n in g.graph.nodes
                        if n.op == "call_function" and "dynafold" in str(n.target)})
    return {"ok": True, "operators": operators,
            "equal": same(eager, got) and same(eager_x, compiled_x),
            "strides": [list(t.stride()) for t in got] == [list(t.stride()) for t in eager]}


def main():
    # The module FlashInfer's body imports at the call, loaded before compile as a server's
    # eager warm-up loads it.
    importlib.import_module(CUTILE)
    print_result(compare_cases(CASES, compare))


if __name__ == "__main__":
    main()
