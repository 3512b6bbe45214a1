#!/usr/bin/env bash
# The SGD grid behind `csam compare`'s default lr and weight decay
# (docs/conventions.md, "Experiment protocol": tuned on SGD with the validation split, reused for SAM
# and CSAM). One seed, SGD only, the comparison's model and epochs on the
# Fashion-MNIST subset (the default data when the grid ran);
# prints one line per (lr, weight decay) with the validation metrics of the
# best checkpoint. Results are recorded in docs/compare-defaults.md.
#
# Usage: scripts/compare_grid.sh [OUT_DIR] [extra csam train flags...]
set -euo pipefail
out=${1:-runs/compare-grid}
shift || true
csam=${CSAM:-target/release/csam}
mkdir -p "$out"
printf 'lr\tweight_decay\tval_accuracy\tval_nll\tval_ece\tbest_epoch\tseconds\n'
for lr in 0.01 0.05 0.1; do
  for wd in 1e-4 5e-4 1e-3; do
    run="$out/sgd-lr$lr-wd$wd"
    if [ ! -f "$run/summary.json" ]; then
      "$csam" train --out "$run" --data fashion-mnist --model mlp --epochs 20 \
        --val-size 2000 --seed 0 --optimizer sgd --lr "$lr" --weight-decay "$wd" \
        --augment false --threads 1 --quiet "$@" > "$run.log"
    fi
    python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
v = s["val"]
row = [sys.argv[2], sys.argv[3], "%.4f" % v["accuracy"], "%.4f" % v["nll"], "%.4f" % v["ece"],
       str(s["best_epoch"]), "%.1f" % s["wall_time_s"]]
print("\t".join(row))
' "$run/summary.json" "$lr" "$wd"
  done
done
