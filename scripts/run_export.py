"""Run an o2o TorchScript export with PyTorch alone (no o2o): the test oracle for `o2o export`.

    python scripts/run_export.py POLICY.pt OBS.json  ->  prints {"actions": [[...], ...]}

OBS.json holds {"obs": [[...], ...]} (float32 observations, one row each). The module is loaded
with torch.jit.load and called once on the whole batch, as a user's program would.
"""
import json
import sys

import torch


def main() -> None:
    module_path, obs_path = sys.argv[1], sys.argv[2]
    policy = torch.jit.load(module_path)
    with open(obs_path) as f:
        obs = torch.tensor(json.load(f)["obs"], dtype=torch.float32)
    with torch.no_grad():
        actions = policy(obs)
    if actions.dtype != torch.float32 or tuple(actions.shape)[0] != obs.shape[0]:
        raise SystemExit(f"unexpected output {actions.dtype} {tuple(actions.shape)}")
    json.dump({"actions": actions.tolist()}, sys.stdout)


if __name__ == "__main__":
    main()
