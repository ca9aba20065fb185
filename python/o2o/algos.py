"""d3rlpy-style algorithm classes: `o2o.IQL(expectile=0.7).fit(dataset, n_steps)`.

Each class is a preset base of o2o (experiments/presets/base/<base>.toml) with typed keyword
arguments laid on top: the keyword defaults are the base's values, and a run the class starts is
an `o2o.Run` of the TOML text `extends = "<base>"` plus `Run.set` of the keywords, so it is the
run the command line makes from the same preset (`o2o.IQL().build("hopper-v2",
"hopper-medium-v2").config()` is the config of the preset `iql-hopper-medium`). Settings without
a keyword go through `set={"agent.key": value, ...}`.

`fit` trains offline, `fit_online` online (from the agent of the previous `fit`/`fit_online`
when there is one, as `o2o run --from` does), `predict` acts with the latest run's policy and
`save_policy` writes it as TorchScript. Every run is a run directory under `runs_dir`
(`outcome.dir`), resumable with `o2o.Run.resume`.
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from ._o2o import Dataset, Outcome, Policy, Run, export, load_policy

_Path = Union[str, "os.PathLike[str]"]

#: The placeholder env id a run of a Python env starts with; `Run.env` replaces it at once.
_PYTHON_ENV = "python-env"


class Algo:
    """The shared half of the algorithm classes: the run settings and the four d3rlpy calls.

    Subclasses say which preset base they stand for (`base`), the embedded preset of that base
    that documents them (`preset`), and turn their keyword arguments into config keys
    (`_keys`).
    """

    #: The config's `algo`.
    algo: str = ""
    #: The preset base whose settings are the defaults.
    base: str = ""
    #: An embedded preset of `base` (its env and dataset added): `build(env, dataset)` with that
    #: preset's env and dataset id gives that preset's config.
    preset: str = ""

    #: Each keyword argument's config keys (the value goes to each of them).
    config_keys: Mapping[str, tuple[str, ...]] = {}

    def __init__(
        self,
        keywords: Mapping[str, Any],
        *,
        seed: int = 0,
        device: str = "auto",
        threads: Optional[int] = None,
        runs_dir: _Path = "runs",
        progress: Union[str, Callable[[dict], object]] = "auto",
        rerun: str = "save",
        set: Optional[Mapping[str, Any]] = None,
    ) -> None:
        #: The algorithm's keyword arguments, as given or defaulted.
        self.keywords = dict(keywords)
        self.seed = seed
        self.device = device
        self.threads = threads
        self.runs_dir = runs_dir
        self.progress = progress
        self.rerun = rerun
        self.extra = dict(set or {})
        self._last: Optional[Outcome] = None
        self._env: Any = None
        self._dataset: Any = None
        self._policy: Optional[Policy] = None

    # -- what subclasses provide ---------------------------------------------------------------

    def _keys(self) -> dict[str, Any]:
        """The keyword arguments as config keys (`"agent.actor_lr": 3e-4`, …): each through
        `config_keys`, then `_derived`."""
        out: dict[str, Any] = {}
        for name, value in self.keywords.items():
            if value is None:
                continue  # the base's value (or one `fit` sets)
            if isinstance(value, (tuple, list)):
                value = [int(v) for v in value]
            for key in self.config_keys[name]:
                out[key] = value
        out.update(self._derived())
        return out

    def _derived(self) -> dict[str, Any]:
        """Config keys computed from several keywords (RLPD's batch of `utd` minibatches)."""
        return {}

    def __getattr__(self, name: str) -> Any:
        # The keywords read as attributes (`iql.expectile`) …
        keywords = self.__dict__.get("keywords", {})
        if name in keywords:
            return keywords[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        # … and set as attributes (`iql.expectile = 0.8`), for the next run.
        keywords = self.__dict__.get("keywords", {})
        if name in keywords:
            keywords[name] = value
        else:
            super().__setattr__(name, value)

    def _offline_keys(self, n_steps: int) -> dict[str, Any]:
        """Keys a `fit` of `n_steps` sets on top (IQL: its actor LR schedule)."""
        return {}

    def _continue_keys(self) -> dict[str, Any]:
        """Keys `fit_online` sets when it continues a previous run's agent: no random actions
        (the agent acts from the start), as `o2o finetune` does."""
        return {"train.random_steps": 0}

    # -- the run ------------------------------------------------------------------------------

    def build(self, env: Any = None, dataset: Any = None) -> Run:
        """The `o2o.Run` this object starts for `env` and `dataset` (not started).

        `env`: an o2o env id (stepped in Rust), a `gymnasium.Env` or a function of no
        arguments that makes one. `dataset`: an `o2o.Dataset`, a D4RL-format file (the run reads
        it: `dataset.path`), a Minari dataset folder, a D4RL registry id (`hopper-medium-v2`,
        from o2o's dataset cache), or `None`.
        """
        if env is None:
            raise ValueError(f"{type(self).__name__}: which env? pass env= (an o2o env id or a gymnasium.Env)")
        python_env = not isinstance(env, str)
        # The config as a preset file would say it: the base, the env, where the data is.
        env_id = _PYTHON_ENV if python_env else env
        lines = [f"extends = {json.dumps(self.base)}", f"env = {json.dumps(env_id)}"]
        if dataset is not None and not isinstance(dataset, Dataset):
            path = os.fspath(dataset)
            if os.path.isdir(path):
                dataset = Dataset.from_minari(path)
            elif os.path.isfile(path):
                lines += ["[dataset]", f"path = {json.dumps(os.path.abspath(path))}"]
            else:
                lines += ["[dataset]", f"id = {json.dumps(path)}"]
        if isinstance(dataset, Dataset):
            lines += ["[dataset]", "in_memory = true"]
        run = self._set(Run.from_toml(self.algo, "\n".join(lines) + "\n"), {**self._keys(), **self.extra})
        if python_env:
            run = run.env(env)
        if isinstance(dataset, Dataset):
            run = run.dataset(dataset)
        run = run.seed(self.seed).runs_dir(self.runs_dir).device(self.device)
        run = run.progress(self.progress).rerun(self.rerun)
        if self.threads is not None:
            run = run.threads(self.threads)
        return run

    def config(self, env: Any = None, dataset: Any = None) -> dict[str, Any]:
        """The resolved config of `build(env, dataset)`, every default filled in."""
        return self.build(env, dataset).config()

    def fit(
        self,
        dataset: Any,
        n_steps: int,
        *,
        env: Any = None,
        eval_every: Optional[int] = None,
        eval_episodes: Optional[int] = None,
    ) -> Outcome:
        """Train offline for `n_steps` gradient steps on `dataset` (see `build`), evaluating in
        `env` (default: the env the dataset names, `Dataset.env`, else the last run's env).

        Raises `ValueError` when no env is known, `o2o.Error` when the run fails.
        """
        env = self._env_for(env, dataset)
        keys = {**self._offline_keys(n_steps), **self._eval(eval_every, eval_episodes)}
        run = self._set(self.build(env, dataset), keys)
        return self._done(run.fit(n_steps), env, dataset)

    def fit_online(
        self,
        env: Any,
        n_steps: int,
        *,
        dataset: Any = None,
        eval_every: Optional[int] = None,
        eval_episodes: Optional[int] = None,
    ) -> Outcome:
        """Train online for `n_steps` env steps in `env` (after the config's random or warm-up
        steps), from the agent of the previous `fit`/`fit_online` when there was one.

        `dataset` (default: the previous `fit`'s) is the offline data algorithms that mix it
        into online batches draw from (RLPD; others with `offline_ratio > 0`).
        """
        if dataset is None:
            dataset = self._dataset
        run = self._set(self.build(env, dataset), self._eval(eval_every, eval_episodes))
        if self._last is not None:
            run = self._set(run, self._continue_keys()).starting_from(self._last.dir)
        return self._done(run.fit_online(n_steps), env, dataset)

    def predict(self, obs: Any) -> Any:
        """Actions of the latest run's deterministic policy, in the env's bounds: `(act_dim,)`
        for one observation, `(B, act_dim)` for a batch (float32)."""
        return self.policy()(obs)

    def policy(self) -> Policy:
        """The latest run's deterministic policy (`o2o.load_policy` of `outcome.dir`)."""
        if self._policy is None:
            self._policy = load_policy(self._latest().dir, env=self._python_env())
        return self._policy

    def save_policy(self, path: _Path) -> Any:
        """Write the latest run's deterministic policy to `path` (and its JSON description
        beside it): ONNX when `path` ends in `.onnx` (onnxruntime runs it), else TorchScript
        (`torch.jit.load(path)` runs it); both without o2o."""
        to = "onnx" if os.fspath(path).endswith(".onnx") else "torchscript"
        return export(self._latest().dir, to=to, out=path, env=self._python_env())

    @property
    def outcome(self) -> Optional[Outcome]:
        """The latest run (`None` before the first `fit`/`fit_online`)."""
        return self._last

    # -- helpers ------------------------------------------------------------------------------

    def _env_for(self, env: Any, dataset: Any) -> Any:
        if env is not None:
            return env
        named = dataset.env if isinstance(dataset, Dataset) else None
        if named is not None:
            return named
        if self._env is not None:
            return self._env
        raise ValueError(
            f"{type(self).__name__}.fit: which env does the data come from? pass env= (an o2o env id "
            "or a gymnasium.Env); the run evaluates the policy there"
        )

    def _set(self, run: Run, keys: Mapping[str, Any]) -> Run:
        """`run.set(keys)`; a value the config refuses is a `ValueError` naming its key (the
        agent's section is checked as a whole, so o2o's message may not name it)."""
        try:
            return run.set(dict(keys))
        except ValueError as whole:
            for key, value in keys.items():
                try:
                    run = run.set({key: value})
                except ValueError as e:
                    raise ValueError(f"{type(self).__name__}: {key} = {value!r}: {e}") from None
            raise whole

    @staticmethod
    def _eval(every: Optional[int], episodes: Optional[int]) -> dict[str, Any]:
        keys: dict[str, Any] = {}
        if every is not None:
            keys["eval.every"] = every
        if episodes is not None:
            keys["eval.episodes"] = episodes
        return keys

    def _done(self, outcome: Outcome, env: Any, dataset: Any) -> Outcome:
        self._last, self._env, self._dataset, self._policy = outcome, env, dataset, None
        return outcome

    def _latest(self) -> Outcome:
        if self._last is None:
            raise RuntimeError(f"{type(self).__name__}: nothing trained yet; call fit or fit_online first")
        return self._last

    def _python_env(self) -> Any:
        return None if isinstance(self._env, str) else self._env

    def __repr__(self) -> str:
        keys = ", ".join(f"{k}={v!r}" for k, v in self._keys().items())
        return f"o2o.{type(self).__name__}({keys})"


def _keywords(names: Mapping[str, Any]) -> dict[str, Any]:
    """A constructor's keyword arguments from its `locals()`."""
    return {k: v for k, v in names.items() if k not in ("self", "run", "__class__")}


def _agent(*names: str) -> dict[str, tuple[str, ...]]:
    return {n: (f"agent.{n}",) for n in names}


#: Keywords of the SAC family (SAC, CQL, Cal-QL, RLPD, WSRL) and their config keys.
_SAC_KEYS = {
    **_agent("actor_lr", "critic_lr", "temperature_lr", "init_temperature", "gamma", "tau"),
    "batch_size": ("train.batch_size",),
    "hidden": ("agent.critic.hidden", "agent.actor.mlp.hidden"),
}


class SAC(Algo):
    """Soft Actor-Critic online (base `sac-mujoco`: SAC's MuJoCo settings)."""

    algo, base, preset = "sac", "sac-mujoco", "sac-hopper"
    config_keys = {
        **_SAC_KEYS,
        "n_critics": ("agent.num_critics", "agent.target_subset"),
        "random_steps": ("train.random_steps",),
        "utd": ("train.updates_per_step",),
        "replay_capacity": ("train.replay_capacity",),
    }

    def __init__(
        self,
        *,
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        temperature_lr: float = 3e-4,
        init_temperature: float = 1.0,
        batch_size: int = 256,
        gamma: float = 0.99,
        tau: float = 0.005,
        n_critics: int = 2,
        hidden: Sequence[int] = (256, 256),
        random_steps: int = 5000,
        utd: int = 1,
        replay_capacity: int = 1_000_000,
        **run: Any,
    ) -> None:
        """`n_critics` critics with the min target over all of them; `utd` updates per env step
        after `random_steps` uniformly random actions."""
        super().__init__(_keywords(locals()), **run)


class IQL(Algo):
    """Implicit Q-Learning (base `iql-locomotion`: the IQL paper's MuJoCo settings)."""

    algo, base, preset = "iql", "iql-locomotion", "iql-hopper-medium"
    config_keys = {
        **_agent("actor_lr", "critic_lr", "value_lr", "gamma", "tau", "expectile", "beta", "max_weight"),
        **_agent("actor_lr_decay_steps"),
        "batch_size": ("train.batch_size",),
        "hidden": ("agent.critic.hidden", "agent.value.hidden", "agent.actor.mlp.hidden"),
        "reward": ("dataset.reward",),
    }

    def __init__(
        self,
        *,
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        value_lr: float = 3e-4,
        batch_size: int = 256,
        gamma: float = 0.99,
        tau: float = 0.005,
        expectile: float = 0.7,
        beta: float = 3.0,
        max_weight: float = 100.0,
        hidden: Sequence[int] = (256, 256),
        reward: str = "iql-locomotion",
        actor_lr_decay_steps: Optional[int] = None,
        **run: Any,
    ) -> None:
        """`beta` is the inverse temperature of the advantage weights exp(β·A), clipped at
        `max_weight`; `reward` the dataset's reward preset (`"iql-locomotion"`: r · 1000 /
        (R_max − R_min) over the dataset's episodes; `"none"`); `actor_lr_decay_steps` the
        length of the actor's cosine schedule (default: the steps of each `fit`; constant
        online)."""
        super().__init__(_keywords(locals()), **run)

    def _offline_keys(self, n_steps: int) -> dict[str, Any]:
        if self.keywords["actor_lr_decay_steps"] is None:
            return {"agent.actor_lr_decay_steps": n_steps}
        return {}

    def _continue_keys(self) -> dict[str, Any]:
        # IQL decays the actor LR only offline; fine-tuning keeps it constant (o2o finetune).
        return {**super()._continue_keys(), "agent.actor_lr_decay_steps": 0}


#: CQL's keywords (CQL and Cal-QL).
_CQL_KEYS = {
    **_SAC_KEYS,
    **_agent("cql_alpha", "cql_n_actions", "cql_lagrange", "max_target_backup"),
    "n_critics": ("agent.num_critics", "agent.target_subset"),
    "offline_ratio": ("train.offline_ratio",),
}


class CQL(Algo):
    """Conservative Q-Learning (base `cql-locomotion`: JaxCQL's settings)."""

    algo, base, preset = "cql", "cql-locomotion", "cql-hopper-medium"
    config_keys = _CQL_KEYS

    def __init__(
        self,
        *,
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        temperature_lr: float = 3e-4,
        init_temperature: float = 1.0,
        batch_size: int = 256,
        gamma: float = 0.99,
        tau: float = 0.005,
        n_critics: int = 2,
        cql_alpha: float = 5.0,
        cql_n_actions: int = 10,
        cql_lagrange: bool = False,
        max_target_backup: bool = False,
        offline_ratio: float = 0.0,
        hidden: Sequence[int] = (256, 256),
        **run: Any,
    ) -> None:
        """`cql_alpha` weighs the conservative penalty (logsumexp over `cql_n_actions` sampled
        actions of each kind); `offline_ratio` is the share of dataset rows in online batches."""
        super().__init__(_keywords(locals()), **run)


class CalQL(Algo):
    """Calibrated Q-Learning (base `calql-locomotion`: Cal-QL's own defaults)."""

    algo, base, preset = "calql", "calql-locomotion", "calql-hopper-medium"
    config_keys = {**_CQL_KEYS, **_agent("calibrate_online")}

    def __init__(
        self,
        *,
        actor_lr: float = 1e-4,
        critic_lr: float = 3e-4,
        temperature_lr: float = 1e-4,
        init_temperature: float = 1.0,
        batch_size: int = 256,
        gamma: float = 0.99,
        tau: float = 0.005,
        n_critics: int = 2,
        cql_alpha: float = 5.0,
        cql_n_actions: int = 10,
        cql_lagrange: bool = False,
        max_target_backup: bool = True,
        calibrate_online: bool = True,
        offline_ratio: float = 0.0,
        hidden: Sequence[int] = (256, 256),
        **run: Any,
    ) -> None:
        """CQL's keywords, with the policy's Q floored at the Monte-Carlo return-to-go
        (`calibrate_online`: online too); Cal-QL's fine-tuning mixes offline data at
        `offline_ratio` (its papers: 0.5)."""
        super().__init__(_keywords(locals()), **run)


class RLPD(Algo):
    """RLPD: online SAC with a LayerNorm critic ensemble on half-offline batches (base
    `rlpd-locomotion`)."""

    algo, base, preset = "rlpd", "rlpd-locomotion", "rlpd-hopper-medium"
    config_keys = {
        **_SAC_KEYS,
        "batch_size": (),
        "utd": ("agent.critic_steps",),
        "n_critics": ("agent.num_critics",),
        "offline_ratio": ("train.offline_ratio",),
        "random_steps": ("train.random_steps",),
    }

    def __init__(
        self,
        *,
        actor_lr: float = 3e-4,
        critic_lr: float = 3e-4,
        temperature_lr: float = 3e-4,
        init_temperature: float = 1.0,
        batch_size: int = 256,
        utd: int = 20,
        gamma: float = 0.99,
        tau: float = 0.005,
        n_critics: int = 10,
        offline_ratio: float = 0.5,
        random_steps: int = 5000,
        hidden: Sequence[int] = (256, 256),
        **run: Any,
    ) -> None:
        """Each env step makes `utd` critic steps on `batch_size`-row minibatches (one update of
        `utd × batch_size` rows), `offline_ratio` of them from the dataset, then one actor and
        one temperature step; the target is the min over 2 of the `n_critics`."""
        super().__init__(_keywords(locals()), **run)

    def _derived(self) -> dict[str, Any]:
        return {"train.batch_size": self.keywords["batch_size"] * self.keywords["utd"]}

    def _continue_keys(self) -> dict[str, Any]:
        # RLPD's random steps are part of its recipe (it never pretrains).
        return {}


class WSRL(Algo):
    """WSRL: offline CQL, then a warm-up of the frozen policy, then online SAC on online data
    with a LayerNorm critic ensemble (base `wsrl-locomotion`)."""

    algo, base, preset = "wsrl", "wsrl-locomotion", "wsrl-hopper-medium"
    config_keys = {
        **_SAC_KEYS,
        **_agent("cql_alpha"),
        "utd": ("agent.online_critic_steps",),
        "n_critics": ("agent.num_critics",),
        "warmup_steps": ("train.warmup_steps",),
        "offline_ratio": ("train.offline_ratio",),
    }

    def __init__(
        self,
        *,
        actor_lr: float = 1e-4,
        critic_lr: float = 3e-4,
        temperature_lr: float = 1e-4,
        init_temperature: float = 1.0,
        batch_size: int = 256,
        utd: int = 4,
        gamma: float = 0.99,
        tau: float = 0.005,
        n_critics: int = 10,
        cql_alpha: float = 5.0,
        warmup_steps: int = 5000,
        offline_ratio: float = 0.0,
        hidden: Sequence[int] = (256, 256),
        **run: Any,
    ) -> None:
        """`fit` is the offline CQL phase (`cql_alpha`, `batch_size` rows a step);
        `fit_online` the warm-up (`warmup_steps` of the pre-trained policy, no updates) and the
        online phase (`utd` critic steps on `batch_size`-row minibatches per env step)."""
        super().__init__(_keywords(locals()), **run)

    def _derived(self) -> dict[str, Any]:
        return {"train.online_batch_size": self.keywords["batch_size"] * self.keywords["utd"]}
