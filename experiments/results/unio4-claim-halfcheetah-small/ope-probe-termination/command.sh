#!/bin/bash
# The OPE probe of ../ope-probe rerun with the official termination rules (commit 80ce0df: halfcheetah
# model rollouts end when a value leaves (−100, 100); before, they never ended). Same runs, same members.
cd /work/main
${O2O:-~/.cache/o2o/exp-bin/o2o-80ce0df} experiment unio4-ope-probe experiments/results/unio4-claim-halfcheetah-small/runs/unio4/seed-0/unio4-halfcheetah-small-0-20261206T225607Z experiments/results/unio4-claim-halfcheetah-small/runs/unio4/seed-1/unio4-halfcheetah-small-1-20261206T235633Z experiments/results/unio4-claim-halfcheetah-small/runs/unio4/seed-2/unio4-halfcheetah-small-2-20261207T003446Z experiments/results/unio4-claim-halfcheetah-small/runs/unio4/seed-3/unio4-halfcheetah-small-3-20261207T011330Z experiments/results/unio4-claim-halfcheetah-small/runs/unio4/seed-4/unio4-halfcheetah-small-4-20261207T015519Z  --horizons 100,1000 --episodes 10 --device cpu --out experiments/results/unio4-claim-halfcheetah-small/ope-probe-termination
