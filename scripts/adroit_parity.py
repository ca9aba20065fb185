#!/usr/bin/env python3
"""Parity oracle for `o2o env parity {pen,door,hammer,relocate}-v1`: Gymnasium-Robotics 1.4.2's
`AdroitHand*-v1` (D4RL's model files), corrected to D4RL's rules where 1.4.2 departs from them.

Request on stdin (as gym_parity.py's, plus each episode's model values):
  {"gym_id": "AdroitHandDoor-v1", "max_episode_steps": 200,
   "episodes": [{"qpos": [...], "qvel": [...], "state": {"door_body_pos": [...]}, "actions": [...]}]}
For each episode: `reset(options={"initial_state_dict": {qpos, qvel, **state}})` (the env's own
way to start from a given state: it writes the door/board/ball/target into the model), then
every action through the `gymnasium.make` stack (TimeLimit included).

Corrections (envsuites.md §3; D4RL `hand_manipulation_suite/*_v0.py`):
- door, hammer, relocate: 1.4.2's dense reward has +0.1·‖palm − object‖ where D4RL has −0.1·…;
  the reward returned is 1.4.2's minus 0.2·‖palm − object‖ (object: the door handle site, the
  hammer body, the ball body), computed from the env's state after the step;
- pen: D4RL ends the episode when the pen falls below z = 0.075 (1.4.2 never terminates):
  terminated = pen z < 0.075. The −5 drop penalty is in both.
Adroit does not touch the joint-type comparison that breaks other Gymnasium-Robotics envs on
MuJoCo 3.17 (envsuites.md §1.3), so no shim is applied here.
"""
import json
import sys

import numpy as np
from gym_parity import replay


def main() -> None:
    req = json.load(sys.stdin)
    import gymnasium as gym
    import gymnasium_robotics

    gym.register_envs(gymnasium_robotics)
    env = gym.make(req["gym_id"], max_episode_steps=req["max_episode_steps"], disable_env_checker=True)
    raw = env.unwrapped
    kind = req["gym_id"].removeprefix("AdroitHand").removesuffix("-v1").lower()

    def hand_object_distance() -> float:
        d = raw.data
        palm = d.site_xpos[raw._model_names.site_name2id["S_grasp"]]
        if kind == "door":
            obj = d.site_xpos[raw.handle_site_id]
        else:
            obj = d.xpos[raw.obj_body_id]
        return float(np.linalg.norm(palm - obj))

    def d4rl_rules(reward, terminated):
        if kind in ("door", "hammer", "relocate"):
            reward = reward - 0.2 * hand_object_distance()
        if kind == "pen":
            terminated = bool(raw.data.xpos[raw.obj_body_id][2] < 0.075)
        return reward, terminated

    episodes = []
    for ep in req["episodes"]:
        state = {"qpos": np.asarray(ep["qpos"], dtype=np.float64), "qvel": np.asarray(ep["qvel"], dtype=np.float64)}
        state.update({k: np.asarray(v, dtype=np.float64) for k, v in ep.get("state", {}).items()})
        obs0, _ = env.reset(seed=0, options={"initial_state_dict": state})
        out = replay(env, obs0, ep["actions"], correct=d4rl_rules)
        episodes.append(out)
    json.dump(
        {
            "gymnasium": gym.__version__,
            "mujoco": __import__("mujoco").__version__,
            "oracle": f"Gymnasium-Robotics {gymnasium_robotics.__version__} `{req['gym_id']}` with D4RL's reward sign"
            + (" and pen-drop termination" if kind == "pen" else ""),
            "episodes": episodes,
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
