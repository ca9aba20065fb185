"""Run o2o ONNX exports with onnxruntime alone (no o2o): the test oracle for `o2o export --to onnx`.

    python scripts/run_onnx.py CASES.json  ->  prints {"<name>": [[...], ...], ...}

CASES.json holds {"observation": [[...], ...], "models": [{"name": ..., "path": "...onnx",
"beta": [...] or null}, ...]}: float32 observations (one row each) and the models to run, with
one β per row for a model that takes β as an input. Each model is loaded with
onnxruntime.InferenceSession on the CPU and called once on the whole batch, as a user's program
would; its inputs and output must be named and typed as policy.json says.

Exits with status 3 when onnxruntime is not installed (the caller decides whether that may skip).
"""
import json
import sys

import numpy as np

try:
    import onnxruntime
except ImportError as e:
    print(f"onnxruntime is not importable: {e}", file=sys.stderr)
    sys.exit(3)


def main() -> None:
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    obs = np.asarray(cases["observation"], dtype=np.float32)
    out = {}
    for model in cases["models"]:
        session = onnxruntime.InferenceSession(model["path"], providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        takes_beta = model.get("beta") is not None
        want = ["observation", "beta"] if takes_beta else ["observation"]
        if names != want:
            raise SystemExit(f"{model['name']}: inputs {names}, expected {want}")
        feeds = {"observation": obs}
        if takes_beta:
            feeds["beta"] = np.asarray(model["beta"], dtype=np.float32)
        outputs = session.get_outputs()
        if [o.name for o in outputs] != ["action"]:
            raise SystemExit(f"{model['name']}: outputs {[o.name for o in outputs]}, expected ['action']")
        (actions,) = session.run(["action"], feeds)
        if actions.dtype != np.float32 or actions.shape[0] != obs.shape[0]:
            raise SystemExit(f"{model['name']}: unexpected output {actions.dtype} {actions.shape}")
        out[model["name"]] = actions.tolist()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
