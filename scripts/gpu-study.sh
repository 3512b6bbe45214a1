#!/usr/bin/env bash
# The convolutional study of RESULTS.md section 6 at the paper's length, for a machine with
# an NVIDIA GPU: scripts/cnn-study.sh with STUDY=gpu (ResNet-20 on the whole of
# Fashion-MNIST, 200 epochs with random crops and flips, CUDA, one run at a time). Whether
# SGD ends overconfident at that length is the first thing its main table's fitted
# temperatures say.
#
#   scripts/gpu-study.sh [STEP...]     STEP: main sharpness baselines (default: all three)
set -euo pipefail
nvidia-smi -L >/dev/null 2>&1 || { echo "gpu-study.sh: no NVIDIA GPU here (nvidia-smi)" >&2; exit 1; }
[ $# -gt 0 ] || set -- main sharpness baselines
STUDY=gpu exec "$(dirname "$0")/cnn-study.sh" "$@"
