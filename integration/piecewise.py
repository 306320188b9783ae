"""A piecewise torch.compile backend shaped like SGLang's.

SGLang's piecewise CUDA graph runner compiles the model forward with
`torch.compile(fullgraph=True, backend=SGLangBackend)`; the backend splits the FX graph at its
split ops (attention), runs those eagerly, and captures every piece between them into CUDA
graphs per batch size. This backend does the same with a marker op, `dynafold_demo::split`
(an identity standing in for attention): pieces between markers are compiled on their own,
replayed from CUDA graphs when `cuda_graphs=True`, run as plain FX code otherwise (CPU).
"""
import torch
import torch.fx
from torch.fx.passes.split_module import split_module

_lib = torch.library.Library("dynafold_demo", "FRAGMENT")
_lib.define("split(Tensor x) -> Tensor")
_lib.impl("split", lambda x: x.clone(), "CompositeExplicitAutograd")
torch.library.register_fake("dynafold_demo::split", lambda x: torch.empty_like(x), lib=_lib)
SPLIT = torch.ops.dynafold_demo.split.default


def split_marker(x):
    """Where the graph is cut (SGLang cuts at attention)."""
    return SPLIT(x)


class _GraphedPiece(torch.nn.Module):
    """One piece, captured into a CUDA graph per input shape on first use and replayed."""

    def __init__(self, piece, pool):
        super().__init__()
        self.piece = piece
        self.pool = pool
        self.graphs = {}

    def forward(self, *args):
        key = tuple((a.shape, a.dtype) if isinstance(a, torch.Tensor) else a for a in args)
        entry = self.graphs.get(key)
        if entry is None:
            static_in = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(2):  # warm-up outside the graph, as capture requires
                    self.piece(*static_in)
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):
                static_out = self.piece(*static_in)
            entry = self.graphs[key] = (graph, static_in, static_out)
        graph, static_in, static_out = entry
        for dst, src in zip(static_in, args):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        graph.replay()
        return static_out


class PiecewiseBackend:
    def __init__(self, cuda_graphs=False):
        self.cuda_graphs = cuda_graphs
        self.pieces = 0  # graph pieces of the latest compile (each batch size recompiles)
        self.compiles = 0
        self.graphs = []
        self.pool = torch.cuda.graph_pool_handle() if cuda_graphs else None

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        part, current = {}, 0
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target in (SPLIT, torch.ops.dynafold_demo.split):
                current += 1
                part[node] = current
                current += 1
            else:
                part[node] = current
        split = split_module(gm, None, lambda n: part[n], keep_original_order=True)
        self.compiles += 1
        self.pieces = 0
        for name, sub in list(split.named_children()):
            is_marker = any(
                n.op == "call_function" and n.target in (SPLIT, torch.ops.dynafold_demo.split)
                for n in sub.graph.nodes
            )
            if is_marker:
                continue
            self.pieces += 1
            if self.cuda_graphs:
                graphed = _GraphedPiece(sub, self.pool)
                self.graphs.append(graphed)
                setattr(split, name, graphed)
        return split.forward
