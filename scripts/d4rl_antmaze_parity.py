#!/usr/bin/env python3
"""Parity oracle for `o2o env parity antmaze-*`: replays episodes in D4RL's OWN AntMaze code.

D4RL 1.1 (`pip download --no-deps d4rl==1.1`, unpacked by scripts/setup.sh into
$O2O_HOME/d4rl/1.1; never installed, never copied into the repository) needs old gym (<0.25) and
mujoco_py, neither of which runs here. This script runs D4RL's unmodified
`d4rl/locomotion/{__init__,ant,maze_env,goal_reaching_env,wrappers}.py` on the `mujoco` 3.17
Python bindings by putting small stand-ins for what they import into `sys.modules`:

- `gym.envs.mujoco.mujoco_env.MujocoEnv`: gym 0.2x's MuJoCo base class as documented — load the
  XML, `init_qpos/init_qvel` = the data after loading, one step with a sampled action to size
  the observation space, `reset()` = `mj_resetData` then `reset_model()`, `set_state` = write
  qpos/qvel then `mj_forward`, `do_simulation` = write ctrl then `mj_step` × frame skip,
  `dt` = timestep × frame skip, `get_body_com` = the body's `xpos`, `state_vector` = [qpos, qvel];
- `mujoco_py.get_version()`, `gym.Env`, `gym.spaces.Box/Discrete`, `gym.utils.EzPickle`,
  `gym.envs.registration.register` (records D4RL's own registrations: map, eval flag, v2 resets,
  horizon), `d4rl.offline_env.OfflineEnv` (dataset plumbing, unused), and
  `d4rl.locomotion.mujoco_goal_env` (imported by ant.py only for its folder).

Request on stdin (the same shape as gym_parity.py's, plus each episode's goal):
  {"gym_id": "antmaze-umaze-v2", "max_episode_steps": 700,
   "episodes": [{"qpos": [...], "qvel": [...], "goal": [x, y], "actions": [[...], ...]}, ...]}
For each episode: `env.reset()` (D4RL draws its own start and goal), then
`env.set_target(goal)` and `set_state(qpos, qvel)` so both sides start from the same state and
goal, then every action through the D4RL stack (NormalizedBoxEnv → AntMazeEnv) with a
Gymnasium-style time limit (truncated once the step count reaches the limit). Before the episodes, 200
resets of D4RL's own (seeded global NumPy stream) come back under "d4rl_starts", so the caller
can check its start and goal distribution against D4RL's.
D4RL prints "Target Goal: ..." on every reset; stdout is redirected to stderr while it runs.
"""
import contextlib
import json
import os
import sys
import tempfile
import types

import numpy as np


def d4rl_dir() -> str:
    d = os.environ.get("O2O_D4RL_DIR")
    if not d:
        home = os.environ.get("O2O_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "o2o")
        d = os.path.join(home, "d4rl", "1.1")
    probe = os.path.join(d, "d4rl", "locomotion", "ant.py")
    if not os.path.isfile(probe):
        sys.exit(f"D4RL 1.1 not found at {probe}: run `make setup` or set O2O_D4RL_DIR")
    return d


def module(name: str, **attrs) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def install_stand_ins(root: str) -> dict:
    import mujoco

    registry = {}

    class Env:
        pass

    class Box:
        def __init__(self, low, high, shape=None, dtype=np.float32):
            self.low = np.broadcast_to(np.asarray(low, dtype=dtype), shape or np.shape(low)).copy()
            self.high = np.broadcast_to(np.asarray(high, dtype=dtype), shape or np.shape(high)).copy()
            self.shape = self.low.shape
            self.dtype = dtype

        def sample(self):
            return np.random.uniform(self.low, self.high).astype(self.dtype)

    class Discrete:
        def __init__(self, n):
            self.n = n

    class EzPickle:
        def __init__(self, *args, **kwargs):
            pass

    class Sim:
        """mujoco_py's MjSim, as far as D4RL's AntMaze uses it."""

        def __init__(self, model, data):
            self.model, self.data = model, data

        def step(self):
            mujoco.mj_step(self.model, self.data)

        def forward(self):
            mujoco.mj_forward(self.model, self.data)

    class MujocoEnv(Env):
        """gym 0.2x `mujoco_env.MujocoEnv` on the mujoco bindings."""

        def __init__(self, model_path, frame_skip):
            self.frame_skip = frame_skip
            self.model = mujoco.MjModel.from_xml_path(model_path)
            self.data = mujoco.MjData(self.model)
            self.sim = Sim(self.model, self.data)
            self.init_qpos = self.data.qpos.ravel().copy()
            self.init_qvel = self.data.qvel.ravel().copy()
            self.seed()
            bounds = self.model.actuator_ctrlrange.copy().astype(np.float32)
            self.action_space = Box(bounds[:, 0], bounds[:, 1])
            observation, _reward, _done, _info = self.step(self.action_space.sample())
            self.observation_space = Box(-np.inf * np.ones_like(observation), np.inf * np.ones_like(observation))

        def seed(self, seed=None):
            self.np_random = np.random.RandomState(seed)
            return [seed]

        @property
        def dt(self):
            return self.model.opt.timestep * self.frame_skip

        def reset(self):
            mujoco.mj_resetData(self.model, self.data)
            return self.reset_model()

        def set_state(self, qpos, qvel):
            self.data.qpos[:] = qpos
            self.data.qvel[:] = qvel
            mujoco.mj_forward(self.model, self.data)

        def do_simulation(self, ctrl, n_frames):
            self.data.ctrl[:] = ctrl
            for _ in range(n_frames):
                self.sim.step()

        def get_body_com(self, name):
            return self.data.body(name).xpos

        def state_vector(self):
            return np.concatenate([self.data.qpos.flat, self.data.qvel.flat])

    def register(id, entry_point, max_episode_steps=None, kwargs=None, **_):
        registry[id] = (entry_point, max_episode_steps, dict(kwargs or {}))

    module("mujoco_py", get_version=lambda: "2.1.2.14")
    gym = module("gym", Env=Env)
    gym.spaces = module("gym.spaces", Box=Box, Discrete=Discrete)
    gym.utils = module("gym.utils", EzPickle=EzPickle)
    gym.error = module("gym.error")
    gym.envs = module("gym.envs")
    gym.envs.registration = module("gym.envs.registration", register=register)
    gym.envs.mujoco = module("gym.envs.mujoco")
    gym.envs.mujoco.mujoco_env = module("gym.envs.mujoco.mujoco_env", MujocoEnv=MujocoEnv)

    pkg = os.path.join(root, "d4rl")
    module("d4rl", __path__=[pkg])

    class OfflineEnv:
        def __init__(self, **kwargs):
            pass

    module("d4rl.offline_env", OfflineEnv=OfflineEnv)
    loco_dir = os.path.join(pkg, "locomotion")
    module("d4rl.locomotion.mujoco_goal_env", __file__=os.path.join(loco_dir, "mujoco_goal_env.py"))
    loco = module("d4rl.locomotion", __path__=[loco_dir], __file__=os.path.join(loco_dir, "__init__.py"))
    # Run D4RL's own registration module: it imports ant/maze_env and registers every id.
    with open(loco.__file__) as f:
        exec(compile(f.read(), loco.__file__, "exec"), loco.__dict__)
    return registry


def main() -> None:
    req = json.load(sys.stdin)
    root = d4rl_dir()
    np.random.seed(0)  # D4RL draws its goals from the global stream
    with contextlib.redirect_stdout(sys.stderr):
        import mujoco

        registry = install_stand_ins(root)
        entry_point, _max_steps, kwargs = registry[req["gym_id"]]
        mod_name, fn_name = entry_point.split(":")
        # maze_env.py writes its XML with tempfile.mkstemp and never deletes it: keep it in a
        # folder that goes away with us.
        with tempfile.TemporaryDirectory() as tmp:
            tempfile.tempdir = tmp
            env = getattr(sys.modules[mod_name], fn_name)(**kwargs)
            tempfile.tempdir = None
        raw = env.wrapped_env
        limit = req["max_episode_steps"]
        starts = []
        for _ in range(req.get("support_draws", 200)):
            env.reset()
            starts.append({"qpos": raw.data.qpos.tolist(), "qvel": raw.data.qvel.tolist(), "goal": [float(v) for v in raw.target_goal]})
        episodes = []
        for ep in req["episodes"]:
            env.reset()
            env.set_target(tuple(ep["goal"]))
            raw.set_state(np.asarray(ep["qpos"], dtype=np.float64), np.asarray(ep["qvel"], dtype=np.float64))
            out = {"obs0": raw._get_obs().tolist(), "obs": [], "reward": [], "terminated": [], "truncated": []}
            for t, a in enumerate(ep["actions"]):
                # The exact float32 values our env used, widened to float64 (see gym_parity.py).
                action = np.asarray(a, dtype=np.float32).astype(np.float64)
                obs, reward, done, _info = env.step(action)
                out["obs"].append(np.asarray(obs, dtype=np.float64).tolist())
                out["reward"].append(float(reward))
                out["terminated"].append(bool(done))
                out["truncated"].append(t + 1 >= limit)
            episodes.append(out)
        reply = {
            "gymnasium": "none",
            "mujoco": mujoco.__version__,
            "oracle": f"D4RL 1.1 `{req['gym_id']}` (its own ant.py, maze_env.py, goal_reaching_env.py, NormalizedBoxEnv; "
            f"eval={kwargs.get('eval')}, v2_resets={kwargs.get('v2_resets', False)}, horizon {_max_steps})",
            "d4rl_starts": starts,
            "episodes": episodes,
        }
    json.dump(reply, sys.stdout)


if __name__ == "__main__":
    main()
