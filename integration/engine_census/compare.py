"""Compares two folders of engine censuses (scripts/engine-census), row by row:
python compare.py DIR_A DIR_B. Exits 1 on any difference, a release only one side has
included."""
import json
import pathlib
import sys


def rows(value, path=""):
    """`value` as (path, leaf) rows; a list of operators is keyed by operator and a list of
    left declarations by declaration and function, so one change is one row, not a shift."""
    if isinstance(value, dict):
        if not value:
            yield path, "{}"
        for k in sorted(value):
            yield from rows(value[k], f"{path}.{k}" if path else k)
    elif isinstance(value, list):
        if not value:
            yield path, "[]"
        seen = {}
        for i, item in enumerate(value):
            key = _key(item, i)
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:
                key = f"{key}#{seen[key]}"
            yield from rows(item, f"{path}[{key}]")
    else:
        yield path, json.dumps(value)


def _key(item, index):
    if isinstance(item, dict) and "op" in item:
        return item["op"]
    if isinstance(item, dict) and "declaration" in item:
        fn = item.get("function") or {}
        return f"{item['declaration']} {fn.get('module')}:{fn.get('qualname')}"
    if isinstance(item, str):
        return item
    return str(index)


def compare(a, b):
    """The differing rows of two censuses, as printable lines."""
    left, right = dict(rows(a)), dict(rows(b))
    out = []
    for path in sorted(set(left) | set(right)):
        if left.get(path) != right.get(path):
            if path in left:
                out.append(f"  - {path} = {left[path]}")
            if path in right:
                out.append(f"  + {path} = {right[path]}")
    return out


def main():
    dir_a, dir_b = map(pathlib.Path, sys.argv[1:3])
    names = sorted({p.name for p in dir_a.glob("*.json")} | {p.name for p in dir_b.glob("*.json")})
    if not names:
        print(f"no census in {dir_a} or {dir_b}")
        return 1
    differing = 0
    for name in names:
        a, b = dir_a / name, dir_b / name
        if not (a.exists() and b.exists()):
            print(f"{name}: only in {a.parent if a.exists() else b.parent}")
            differing += 1
            continue
        lines = compare(json.loads(a.read_text()), json.loads(b.read_text()))
        print(f"{name}: {'identical' if not lines else f'{len(lines)} differing rows'}")
        for line in lines:
            print(line)
        differing += bool(lines)
    print(f"{len(names) - differing} of {len(names)} releases identical")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
