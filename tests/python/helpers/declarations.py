"""FlashInfer's `register_custom_op` declarations in a release, read from its source (no import,
no GPU): per declaration its module, the decorated function's qualified name, the declared name,
`mutates_args` as written, and its parameters. The op audit (integration/op_audit) is checked
against this list so that no declaration goes unaudited, and the declaration sweep
(declaration_sweep.py) rebuilds each declaration from it: with `nodes=True` each entry also
carries the decorator call, the decorated function's definition and the `register_fake_op`
definition declared with it in the same scope (None when there is none)."""
import ast
import pathlib
import warnings


def declarations(root, nodes=False):
    """Every declaration under `root`/flashinfer, in file order."""
    root = pathlib.Path(root)
    out = []
    for path in sorted((root / "flashinfer").rglob("*.py")):
        if "data" in path.relative_to(root).parts:  # the bundled C++ trees' own scripts
            continue
        try:
            text = path.read_text()
            if "register_custom_op" not in text:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(text)
        except (SyntaxError, UnicodeDecodeError):
            continue
        module = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        _visit(tree, "", module, out, nodes)
    return out


def _visit(node, prefix, module, out, nodes):
    children = list(ast.iter_child_nodes(node))
    # Fakes are declared beside their op, in the same scope, under the same name expression.
    fakes = {ast.unparse(d.args[0]): child for child in children
             if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
             for d in child.decorator_list if _is_decorator(d, "register_fake_op") and d.args}
    for child in children:
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            qualname = prefix + child.name
            for decorator in child.decorator_list:
                if _is_decorator(decorator, "register_custom_op"):
                    name = ast.unparse(decorator.args[0]) if decorator.args else None
                    entry = {
                        "module": module, "function": qualname, "name": name,
                        "mutates_args": next((ast.unparse(k.value) for k in decorator.keywords
                                              if k.arg == "mutates_args"), None),
                        "params": [a.arg for a in child.args.args],
                    }
                    if nodes:
                        entry.update(decorator=decorator, node=child, fake=fakes.get(name))
                    out.append(entry)
            _visit(child, qualname + ".<locals>.", module, out, nodes)
        elif isinstance(child, ast.ClassDef):
            _visit(child, prefix + child.name + ".", module, out, nodes)
        else:
            _visit(child, prefix, module, out, nodes)


def _is_decorator(decorator, name):
    if not isinstance(decorator, ast.Call):
        return False
    func = decorator.func
    return getattr(func, "id", getattr(func, "attr", None)) == name
