"""Reference prototype: the same fold rules as dynafold's Rust rewriter, in pure Python `ast`
(issue 7, benchmark 2). It exists only to be timed against the Rust rewriter; it is not used
by dynafold. Rules: in `flashinfer.jit.cpp_ext`, the bodies of `get_cuda_path`,
`get_cuda_version` and `is_cuda_version_at_least` become returns of precomputed globals and
their `functools.cache` decorators go; elsewhere `is_cuda_version_at_least("<literal>")`
becomes `True` or `False`.
"""
import ast

from packaging.version import Version

CACHE_DECORATORS = {"cache", "lru_cache"}


def _is_cache(d):
    target = d.func if isinstance(d, ast.Call) else d
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
    return name in CACHE_DECORATORS


class _Fold(ast.NodeTransformer):
    def __init__(self, cuda_version):
        self.version = Version(cuda_version)
        self.edits = 0

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        body = {
            "get_cuda_path": "__dynafold_cuda_path__",
            "get_cuda_version": "__dynafold_cuda_version__",
        }.get(node.name)
        if body is not None:
            node.body = [ast.copy_location(ast.Return(ast.Name(body, ast.Load())), node.body[0])]
        elif node.name == "is_cuda_version_at_least" and node.args.args:
            arg = node.args.args[0].arg
            ret = ast.parse(f"return __dynafold_cuda_version__ >= Version({arg})").body[0]
            node.body = [ast.copy_location(ret, node.body[0])]
        else:
            return node
        node.decorator_list = [d for d in node.decorator_list if not _is_cache(d)]
        ast.fix_missing_locations(node)
        self.edits += 1
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        if (
            name == "is_cuda_version_at_least"
            and len(node.args) == 1
            and not node.keywords
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            self.edits += 1
            return ast.copy_location(ast.Constant(self.version >= Version(node.args[0].value)), node)
        return node


def fold(source, filename, cuda_version="12.8"):
    """Parse and transform; returns the tree (compile it with `compile(tree, filename, "exec")`)."""
    tree = ast.parse(source, filename)
    folder = _Fold(cuda_version)
    tree = folder.visit(tree)
    return tree, folder.edits
