#!/usr/bin/env python3
"""Mean +- std over seeds of the `csam eval --corruptions ... --ood ...` reports of a
compare directory (RESULTS.md's shift table). Usage: shift_table.py COMPARE_DIR REPORT_NAME
where REPORT_NAME is the eval-*.json file name each run directory holds."""
import json
import statistics as st
import sys
from pathlib import Path


def reports(root, name):
    by_method = {}
    for path in sorted(Path(root, "runs").glob(f"*/{name}")):
        method = path.parent.name.rsplit("-seed", 1)[0]
        by_method.setdefault(method, []).append(json.loads(path.read_text()))
    return by_method


def main(root, name):
    by_method = reports(root, name)
    print("| Method | Test acc (%) | Test ECE (%) | Corrupted acc (%) | Corrupted ECE (%) "
          "| Corrupted NLL | OOD AUROC max-prob (%) | OOD AUROC entropy (%) |")
    print("|:--|--:|--:|--:|--:|--:|--:|--:|")
    for method in ("sgd", "sam", "csam"):
        rows = [[100 * r["metrics"]["accuracy"], 100 * r["metrics"]["ece"],
                 100 * r["corruptions"]["mean"]["accuracy"],
                 100 * r["corruptions"]["mean"]["ece"], r["corruptions"]["mean"]["nll"],
                 100 * r["ood"]["auroc_max_probability"], 100 * r["ood"]["auroc_entropy"]]
                for r in by_method.get(method, [])]
        if not rows:
            continue
        digits = [2, 2, 2, 2, 3, 2, 2]
        cells = [f"{st.mean(c):.{d}f} ± {st.stdev(c):.{d}f}" if len(c) > 1 else f"{c[0]:.{d}f}"
                 for c, d in zip(zip(*rows), digits)]
        print(f"| {method.upper()} | " + " | ".join(cells) + " |")
    print()
    print("| Method | " + " | ".join(f"severity {k} acc / ECE (%)" for k in range(1, 6)) + " |")
    print("|:--|" + "--:|" * 5)
    for method in ("sgd", "sam", "csam"):
        runs = by_method.get(method, [])
        if not runs:
            continue
        cells = []
        for k in range(5):
            acc = st.mean(100 * r["corruptions"]["per_severity"][k]["accuracy"] for r in runs)
            ece = st.mean(100 * r["corruptions"]["per_severity"][k]["ece"] for r in runs)
            cells.append(f"{acc:.2f} / {ece:.2f}")
        print(f"| {method.upper()} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
