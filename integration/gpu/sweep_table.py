"""The op sweep's table for the docs, from ops.sh's merged lines:
    python3 sweep_table.py DIR RELEASE...   (reads DIR/sweep-RELEASE-{with,without}.txt)
One row per op: per release, without and with dynafold, and the operators the graph held."""
import re
import sys


def read(path):
    rows = {}
    for line in open(path):
        m = re.match(r"SWEEP (\S+) (PASS|FAIL) (.*)", line)
        if m:
            rows[m[1]] = (m[2], m[3])
    return rows


# What Dynamo's error names, as it appears in the message -> the table's word for it.
KNOWN = {"posix.stat": "posix.stat", "_thread.allocate_lock": "_thread.allocate_lock",
         "`open`": "open", "`Function.__call__`": "Function.__call__"}


def why(status, rest):
    if status == "PASS":
        return "pass"
    for needle, word in KNOWN.items():
        if needle in rest:
            return "fails: " + word
    return "fails: " + rest[:60]


def main(folder, releases):
    runs = {(r, w): read(f"{folder}/sweep-{r}-{w}.txt") for r in releases for w in ("without", "with")}
    names = list(runs[(releases[0], "with")])
    head = ["op"] + [f"{r} {w}" for r in releases for w in ("without", "with")] + ["operators in the graph"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name in names:
        cells = [f"`{name}`"]
        ops = ""
        for r in releases:
            for w in ("without", "with"):
                status, rest = runs[(r, w)].get(name, ("-", ""))
                cells.append(why(status, rest) if status != "-" else "-")
                m = re.search(r"ops: (\S+)", rest)
                if m and not ops:
                    ops = re.sub(r"_dtype_q\w+?_run", "_<uri>_run", m[1])
        cells.append(ops)
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
