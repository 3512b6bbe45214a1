#!/usr/bin/env bash
# The paper's comparison on a convolutional network that SGD leaves overconfident
# (RESULTS.md section 6): ResNet-20 on the whole of Fashion-MNIST, 3 seeds.
#
#   scripts/cnn-study.sh [STEP...]     STEP: main sharpness baselines efficient
#                                      (default: main sharpness)
#
# On the CPU (the default): no augmentation, 10 epochs, lr 0.05, weight decay 5e-4 (the
# setting the SGD probe of section 6 chose), bfloat16 forward passes (oneDNN's AMX kernels
# on CPUs that have them), two runs at a time at the lowest CPU priority. With STUDY=gpu
# (scripts/gpu-study.sh): the paper's length, 200 epochs with its random crops and flips,
# on CUDA, one run at a time.
#
# RUNS (default runs/) holds the experiment directories; CSAM (default target/release/csam)
# is the binary. Every step resumes: rerun the script after an interruption and finished
# runs are reused, interrupted ones resumed.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-runs}
csam=${CSAM:-target/release/csam}
[ -x "$csam" ] || cargo build --release -p csam-cli
shared=(--model resnet20 --data fashion-mnist-full --lr 0.05 --weight-decay 5e-4
        --precision bf16 --seeds 0,1,2 --quiet)
case ${STUDY:-cpu} in
    cpu) shared+=(--no-augment --epochs 10 --jobs 2); prefix=cnn; run=(nice -n 19); device=() ;;
    gpu) shared+=(--augment --epochs 200 --device cuda --jobs 1); prefix=gpu; run=(); device=(--device cuda) ;;
    *) echo "STUDY=$STUDY: cpu or gpu" >&2; exit 2 ;;
esac
timed() { local start=$SECONDS; "${run[@]}" "$@"; echo "($((SECONDS - start)) s) $*" >&2; }

main() {
    # SGD, SAM and CSAM at the paper's CIFAR-10 radius, with the theory diagnostics.
    timed "$csam" compare --methods sgd,sam,csam --rho 0.05 --gamma 1 --track-theory \
        "${shared[@]}" --out "$runs/$prefix-resnet20-main"
}

sharpness() {
    # kappa_max / kappa_min of the last weights of every run of the main table
    # (written as sharpness.json into each run directory).
    local summary
    for summary in $(find "$runs/$prefix-resnet20-main" -name summary.json | sort); do
        local dir=${summary%/summary.json}
        [ -f "$dir/sharpness.json" ] && continue
        timed "$csam" sharpness --run "$dir" --checkpoint last --rho 0.05 "${device[@]}" --quiet
    done
}

baselines() {
    # CSAM against the loss baselines at their authors' settings, SAM and CSAM at the
    # paper's baseline radius (rho 0.2).
    timed "$csam" compare --methods sam,csam,focal,flsd,ls,mbls,dual-focal --rho 0.2 --gamma 1 \
        "${shared[@]}" --out "$runs/$prefix-resnet20-baselines"
}

efficient() {
    # The cheap CSAM variants of RESULTS.md section 5 against SGD and CSAM in
    # this setting, one seed. Its cost.md times two runs at a time: compare
    # the methods' times one at a time on an idle machine (RESULTS.md 5).
    timed "$csam" compare --methods sgd,csam,msam+csam,subbatch+csam --rho 0.05 --gamma 1 \
        "${shared[@]}" --seeds 0 --out "$runs/$prefix-resnet20-efficient"
}

steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(main sharpness)
for step in "${steps[@]}"; do
    case $step in
        main|sharpness|baselines|efficient) "$step" ;;
        *) echo "unknown step $step (main, sharpness, baselines, efficient)" >&2; exit 2 ;;
    esac
done
