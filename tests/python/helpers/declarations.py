"""FlashInfer's `register_custom_op` declarations in a release, read from its source (no import,
no GPU): per declaration its module, the decorated function's qualified name, the declared name,
`mutates_args` as written, and its parameters. The op audit (docs/op-audit) is checked against
this list so that no declaration goes unaudited."""
import ast
import pathlib
import warnings


def declarations(root):
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
        _visit(tree, "", module, out)
    return out


def _visit(node, prefix, module, out):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            qualname = prefix + child.name
            for decorator in child.decorator_list:
                if _is_declaration(decorator):
                    out.append({
                        "module": module, "function": qualname,
                        "name": ast.unparse(decorator.args[0]) if decorator.args else None,
                        "mutates_args": next((ast.unparse(k.value) for k in decorator.keywords
                                              if k.arg == "mutates_args"), None),
                        "params": [a.arg for a in child.args.args],
                    })
            _visit(child, qualname + ".<locals>.", module, out)
        elif isinstance(child, ast.ClassDef):
            _visit(child, prefix + child.name + ".", module, out)
        else:
            _visit(child, prefix, module, out)


def _is_declaration(decorator):
    if not isinstance(decorator, ast.Call):
        return False
    func = decorator.func
    return getattr(func, "id", getattr(func, "attr", None)) == "register_custom_op"
