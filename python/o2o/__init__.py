"""o2o from Python: offline-to-online RL with o2o's Rust runner behind a small API.

Everything here calls the o2o-experiments library (the same builder the `o2o` command line
drives); see docs/python.md.

    import o2o
    done = o2o.Run.preset("sac-inverted-pendulum").set({"train.online_steps": 5000}).seed(0).run()
    print(done.dir, done.summary["final_eval"]["mean_return"])

    iql = o2o.IQL(expectile=0.7, batch_size=256, device="cpu")     # d3rlpy's shape
    iql.fit(o2o.Dataset.from_d4rl("hopper-medium-v2.hdf5"), n_steps=10_000)
    iql.predict(observations)
"""

from . import _o2o
from ._o2o import *  # noqa: F403 (the native module's names: its __all__, written once in python/src/lib.rs)
from .algos import CQL, IQL, RLPD, SAC, WSRL, Algo, CalQL

__all__ = [*_o2o.__all__, "Algo", "SAC", "IQL", "CQL", "CalQL", "RLPD", "WSRL"]
