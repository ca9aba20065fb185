#!/bin/bash
# The OPE probe on the 100k-critic claim runs: AM-Q (H = 100, 1000) against 20 real episodes per BC and BPPO member.
cd "$(dirname "$0")/../../../.."
O2O=${O2O:-o2o}
nice $O2O experiment unio4-ope-probe experiments/results/unio4-claim-hopper-small-critic100k/runs/unio4/seed-*/unio4-hopper-small-* \
  --horizons 100,1000 --episodes 20 --device cpu --out experiments/results/unio4-claim-hopper-small-critic100k/ope-probe
