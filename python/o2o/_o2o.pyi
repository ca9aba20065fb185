"""o2o._o2o: the Rust half of the package `o2o` (PyO3), re-exported by `o2o`.

Everything here calls the o2o-experiments library (the same builder the `o2o` command line
drives); see docs/python.md.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any, Callable, Mapping, Sequence, Union

import numpy as np
import numpy.typing as npt

__version__: str

_Path = Union[str, os.PathLike[str]]
_Array = npt.ArrayLike

class Error(RuntimeError):
    """An error o2o reported: a missing file, a run that cannot continue, an env that fails.

    The message is the one the `o2o` command line prints, each cause on a line of its own.
    Bad input the caller gave (an override, an array) raises `ValueError` instead. The kinds
    of error a caller can fix have subclasses of their own, below.
    """

class BadConfig(Error, ValueError):
    """A config, preset or override that cannot be used: an unknown preset or key, a file that
    is not TOML, a value out of range, an override that is not `key=value`. Also a `ValueError`,
    as bad overrides were before they had a class."""

class BadDataset(Error):
    """Offline data that cannot be used: a missing or unreadable file, a missing key, columns
    that do not fit the env, in-memory data not given, data that changed since the run started."""

class DamagedCheckpoint(Error):
    """A checkpoint that cannot be read or loaded: truncated, a file missing, not a checkpoint,
    written by another algorithm."""

class RunDir(Error):
    """A directory that is not a run, or not one that can be used as asked (no `config.toml` or
    `manifest.json`, no complete checkpoint, not the checkpoint asked for)."""

class RunInUse(Error):
    """A run that another live process holds (trains or resumes it)."""

def list_presets() -> list[str]:
    """The names of the presets embedded in o2o (`o2o train --list-presets`)."""

class Run:
    """A run being configured, then started: the Rust builder `o2o_experiments::Run`.

    Every method returns a new `Run` (the one it is called on is unchanged) and is checked at
    once: an unknown key fails at `set`, not when the run starts. `run()`, `fit()` and
    `fit_online()` start it; they train on a thread of their own with the GIL released, and
    Ctrl-C stops the run at its next safe point, writes a checkpoint, and raises
    `KeyboardInterrupt` naming the run to resume.
    """

    @staticmethod
    def preset(name_or_path: _Path) -> Run:
        """A run of an embedded preset (see `list_presets()`) or of a preset-format `.toml` file.

        Raises `o2o.Error` naming the preset when there is none of that name.
        """
    @staticmethod
    def from_toml(name: str, text: str) -> Run:
        """A run of a config written as TOML text in a preset's format; `name` names the run
        directories (`<runs_dir>/<name>-<seed>-<time>`)."""
    @staticmethod
    def finetune(parent: _Path) -> Run:
        """A new run fine-tuning `parent`'s final agent online with the parent's config
        (`o2o finetune --from`): no offline, random or warm-up steps, an evaluation at the start."""
    @staticmethod
    def resume(dir: _Path) -> Run:
        """Continue the run in `dir` from its newest checkpoint, exactly (`o2o resume`).

        A run of data handed over in memory needs the same `dataset(...)` again; a resume with
        other data is refused, naming both hashes.
        """
    def set(self, *overrides: Union[str, Mapping[str, Any], Sequence[str]]) -> Run:
        """Override config keys: `"key=value"` (as `o2o train --set` takes it), a dict
        `{"train.online_steps": 20000, "agent.critic.hidden": [64, 64]}`, or a list of
        `"key=value"` strings.

        Raises `ValueError` naming the key when it is unknown or its value is wrong, and on a
        resumed run (it keeps the config it started with).
        """
    def seed(self, seed: int) -> Run:
        """The run seed; every random source is derived from it (same as `set("seed=N")`)."""
    def runs_dir(self, dir: _Path) -> Run:
        """The folder new run directories are created in (default `runs/` in the current
        directory)."""
    def device(self, device: str) -> Run:
        """`"auto"` (the default: CUDA when available), `"cpu"`, `"cuda"` or `"cuda:N"`.

        Raises `ValueError` for `"cuda"` when libtorch sees no CUDA device.
        """
    def threads(self, n: int) -> Run:
        """Torch intra-op threads for this run (default: libtorch's choice, usually the number of
        cores). Set it here rather than with `torch.set_num_threads`: the run trains on a thread
        of its own."""
    def env(self, env: Union[str, Any, Callable[[], Any]]) -> Run:
        """The env to train and evaluate in, instead of the config's:

        - an o2o env id (`"Hopper-v5"`): made and stepped in Rust, the GIL released;
        - a `gymnasium.Env` whose observation and action spaces are `Box`es (the action bounds
          finite): stepped from o2o's Rust loop, the GIL taken for each `reset`/`step`, with
          Gymnasium 1.x semantics (`reset(seed=...)` at every episode, `terminated` and
          `truncated` kept apart; `info["is_success"]` is the success flag). The run copies it
          (`copy.deepcopy`, else `gymnasium.make(env.spec)`) for each env it makes (one to act
          in, one to evaluate on), and never steps the object given;
        - a function of no arguments returning such an env, called for each env the run makes.

        The config's `env` becomes the env's id (`env.spec.id`, else its class name). Raises
        `ValueError` for an unknown id or a space o2o cannot take, `TypeError` for anything
        else. An exception the env raises during the run stops it and is raised by `run()` as
        it was raised. A resumed run of a Python env needs the same `.env(...)` again.
        """
    def starting_from(self, run_or_checkpoint: _Path) -> Run:
        """Start from another run's agent (its newest checkpoint, or the checkpoint folder
        `<run>/checkpoints/step-N`) with its whole state (weights, optimizer moments,
        temperature), skipping this config's offline phase and evaluating the starting point
        (`o2o run --from`)."""
    def dataset(self, data: Dataset) -> Run:
        """Offline data built in memory (`Dataset.from_arrays`) instead of the config's file; the
        config records `dataset.in_memory = true` and the manifest the data's sha256."""
    def rerun(self, mode: str) -> Run:
        """The Rerun recording: `"save"` (`recording.rrd` in the run directory, the default),
        `"off"`, `"spawn"` (a viewer), or `"connect"` / `"connect=HOST:PORT"`."""
    def progress(
        self, mode: Union[str, Callable[[dict[str, Any]], object]], every: float | None = None
    ) -> Run:
        """How progress is shown: `"auto"` (the default: a bar on a terminal, plain lines when
        stderr is not one, the notebook bar inside Jupyter), `"bar"`, `"plain"` (a line every
        `every` seconds, 30 by default), `"notebook"` (through Python's `sys.stderr`, with tqdm
        where installed) or `"off"`; or a callable, called with a dict per update (`step`,
        `total`, `phase`, `steps_per_s`, `eta_s`, `train_return`, `eval_return`, `eval_score`,
        `done`) at most every `every` seconds (0.5 by default) and once at the end. An exception
        in the callable is printed as unraisable and the run goes on without it."""
    def on_eval(self, callback: Callable[[dict[str, Any], dict[str, Any]], object]) -> Run:
        """Call `callback(result, state)` after every evaluation (`result`: `step`,
        `mean_return`, …; `state`: the runner's counters). An exception it raises stops the run
        (its last checkpoint stays resumable) and is raised by `run()`."""
    def on_checkpoint(self, callback: Callable[[pathlib.Path, dict[str, Any]], object]) -> Run:
        """Call `callback(checkpoint_folder, state)` after every checkpoint. An exception it
        raises stops the run and is raised by `run()`."""
    def config(self) -> dict[str, Any]:
        """The resolved config as it stands, every default filled in (`o2o train --print-config`)."""
    def run(self) -> Outcome:
        """Run the config's phases (offline → random → warm-up → online) to the end, or continue
        a resumed run to its end.

        Raises `o2o.Error` when the run fails, `KeyboardInterrupt` after the checkpoint when it
        is interrupted, and the exception a callback raised.
        """
    def fit(self, steps: int) -> Outcome:
        """Train offline only: `steps` gradient steps on the dataset (d3rlpy's `fit`)."""
    def fit_online(self, steps: int) -> Outcome:
        """Train online only: `steps` env steps with updates (d3rlpy's `fit_online`), after the
        config's random and warm-up steps."""

class Outcome:
    """A finished run: its directory, `summary.json` and `metrics.jsonl`."""

    @property
    def dir(self) -> pathlib.Path:
        """The run directory: config.toml, manifest.json, metrics.jsonl, checkpoints/,
        summary.json (and recording.rrd)."""
    @property
    def summary(self) -> dict[str, Any]:
        """`summary.json`: `finished`, `steps`, `grad_steps`, `env_steps`, `episodes`, `wall_s`,
        `final_eval`, `best_eval`, `phase_evals`, `checkpoint`, `warnings`."""
    @property
    def reused(self) -> bool:
        """True when nothing ran: `Run.resume` found the run already finished."""
    @property
    def metrics(self) -> list[dict[str, Any]]:
        """Every record of `metrics.jsonl`, in order: `grad_step`, `env_step`, `wall_s` and the
        values logged then (`train/…`, `eval/…`, `perf/…`)."""
    def metrics_arrays(self) -> dict[str, npt.NDArray[np.float64]]:
        """`metrics.jsonl` as columns: each numeric key to a float64 array with one entry per
        record, NaN where a record lacks the key."""

class Dataset:
    """Offline transitions in D4RL's layout, held by o2o; hand it to a run with `Run.dataset`."""

    @staticmethod
    def from_arrays(
        *,
        observations: _Array,
        actions: _Array,
        rewards: _Array,
        terminals: _Array,
        timeouts: _Array,
        next_observations: _Array | None = None,
    ) -> Dataset:
        """Transitions from arrays, with the checks a D4RL file gets.

        `observations` `(N, obs_dim)`, `actions` `(N, act_dim)` in the env's units, `rewards`
        `(N,)` as the env gives them (numbers: floats or integers), `terminals` `(N,)` (true
        ends: bootstrapping stops) and `timeouts` `(N,)` (time-limit ends) as bools or numbers
        (non-zero is set), `next_observations` `(N, obs_dim)` when rows do not follow each other.

        Raises `ValueError` naming the key on a wrong shape, dtype or row count, and the row and
        column of a NaN or infinite value.
        """
    @staticmethod
    def from_d4rl(path: _Path) -> Dataset:
        """A D4RL-format HDF5 file (`observations`, `actions`, `rewards`, `terminals`, and
        `timeouts`, `next_observations` when present), read and checked by o2o's reader as a run
        reads it.

        Raises `FileNotFoundError` when there is no file, `ValueError` naming the file and key
        when it is not D4RL data.
        """
    @staticmethod
    def from_minari(path: _Path) -> Dataset:
        """A Minari dataset folder (`<id>/` or `<id>/data/` with `metadata.json` and
        `main_data.hdf5`; flat `Box` observations and actions), one row per step: `terminals`
        from `terminations`, `timeouts` from `truncations`, `next_observations` from each
        episode's next observation.

        Raises `FileNotFoundError` when there is no folder, `ValueError` naming the file and key
        when it is not a Minari dataset.
        """
    def __len__(self) -> int: ...
    @property
    def obs_dim(self) -> int: ...
    @property
    def act_dim(self) -> int: ...
    @property
    def env(self) -> str | None:
        """The env the data was recorded in, when the file names it (a registry file such as
        `hopper-medium-v2.hdf5`, a Minari dataset's `env_spec`); `None` otherwise."""
    @property
    def source(self) -> pathlib.Path | None:
        """The file or folder the data was read from (`None` for arrays)."""
    @property
    def episodes(self) -> int:
        """Episodes: runs of rows ended by `terminals` or `timeouts` (a trailing partial one counts)."""
    @property
    def sha256(self) -> str:
        """sha256 of the contents: what a run's manifest records, and what a resume checks."""
    def warnings(self) -> list[str]:
        """Data-quality notes that are not errors (e.g. a trailing partial episode)."""

class Policy:
    """A run's deterministic policy (the actor's mode), acting as o2o's evaluation acts."""

    def __call__(self, obs: _Array) -> npt.NDArray[np.float32]:
        """Actions in the env's bounds, float32: `(act_dim,)` for one observation `(obs_dim,)`,
        `(B, act_dim)` for a batch `(B, obs_dim)`. Raises `ValueError` on another shape."""
    @property
    def obs_dim(self) -> int: ...
    @property
    def act_dim(self) -> int: ...
    @property
    def action_bounds(self) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """The env's action bounds `(low, high)`."""
    @property
    def env(self) -> str:
        """The env the policy was trained in."""
    @property
    def algo(self) -> str: ...
    @property
    def checkpoint(self) -> pathlib.Path:
        """The checkpoint folder it was loaded from."""
    @property
    def step(self) -> int:
        """The loop step of that checkpoint."""

def load_policy(
    run_dir: _Path, checkpoint: str | None = None, device: str = "cpu", env: Any = None
) -> Policy:
    """The deterministic policy of the run in `run_dir`, from `checkpoint` (`"step-N"`) or the
    newest one, as a callable from NumPy to NumPy. A run of an env written in Python needs that
    env again (`env=`: a `gymnasium.Env` or a factory, as `Run.env` takes it; its spaces give the
    policy's sizes and action bounds); other runs make their env from the registry."""

def export(
    run_dir: _Path,
    to: str = "torchscript",
    out: _Path | None = None,
    checkpoint: str | None = None,
    env: Any = None,
    beta: str | float | None = None,
) -> pathlib.Path:
    """Write the run's deterministic policy (`o2o export`) as TorchScript (`to="torchscript"`)
    or ONNX (`to="onnx"`): `out` (default `<run_dir>/export/policy.pt` or `policy.onnx`) and a
    JSON description beside it. Returns the file's path; `torch.jit.load` or onnxruntime runs
    it without o2o. `beta` (ONNX, FamO2O): `"agent"` (the default: the balance model's β inside
    the graph), `"input"` (a second input `beta`) or a number. `env` as for `load_policy`."""
