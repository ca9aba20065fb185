#!/bin/bash
# Uni-O4 on hopper-small with a 200k-step critic (the claim's preset has 30k; official 2e6), offline only, seeds 0 and 4.
cd /work/main
out=experiments/results/unio4-claim-hopper-small/critic-budget-probe
for s in 0 4; do
  nice ~/.cache/o2o/exp-bin/o2o-probe run --preset unio4-hopper-small --seed $s --threads 1 --device cpu --rerun=off --progress off \
    --set agent.critic.steps=200000 --set train.online_steps=2048 --set eval.every=2048 --runs-dir $out/critic-200k > $out-seed$s.log 2>&1
  echo "seed $s rc=$?"
done
