"""A run's progress where the Rust side's stderr is not seen: in Jupyter notebooks.

A notebook cell shows what Python writes to ``sys.stderr``; what the Rust runner writes to the
process's file descriptor 2 goes to the kernel's log instead. So inside a Jupyter kernel,
``progress="auto"`` (the default) and ``progress="notebook"`` hand each update to a
:class:`NotebookBar`: a ``tqdm.auto`` bar (a widget in Jupyter) where tqdm is installed, one
line rewritten in place on ``sys.stderr`` otherwise. ``Run.progress(callable)`` hands the same
updates, as dicts, to any function.
"""

import sys

__all__ = ["in_notebook", "NotebookBar", "format_update"]


def in_notebook() -> bool:
    """True inside a Jupyter (IPython) kernel."""
    if "ipykernel" not in sys.modules:
        return False
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    shell = get() if callable(get) else None
    return shell is not None and getattr(shell, "kernel", None) is not None


def _seconds(s):
    if s is None:
        return "?"
    s = int(round(s))
    h, m, sec = s // 3600, s % 3600 // 60, s % 60
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


def _latest(u: dict) -> str:
    parts = []
    if u.get("train_return") is not None:
        parts.append(f"train return {u['train_return']:.1f}")
    if u.get("eval_return") is not None:
        ev = f"eval return {u['eval_return']:.1f}"
        if u.get("eval_score") is not None:
            ev += f" (score {u['eval_score']:.1f})"
        parts.append(ev)
    return " · ".join(parts)


def format_update(u: dict) -> str:
    """``step 1200/5000 (online) · 350 steps/s · eval return … · ETA 3m10s``."""
    latest = _latest(u)
    latest = f" · {latest}" if latest else ""
    return (
        f"step {u['step']}/{u['total']} ({u['phase']}) · {u['steps_per_s']:.0f} steps/s"
        f"{latest} · ETA {_seconds(u.get('eta_s'))}"
    )


class NotebookBar:
    """Draws progress updates in a notebook cell.

    ``use_tqdm``: ``None`` uses ``tqdm.auto`` when it imports, ``False`` never does.
    ``file``: where the plain line goes (``sys.stderr`` at the time of each update by default).
    """

    def __init__(self, use_tqdm=None, file=None):
        self._file = file
        self._bar = None
        self._tqdm = None
        if use_tqdm is not False:
            try:
                from tqdm.auto import tqdm

                self._tqdm = tqdm
            except ImportError:
                if use_tqdm:
                    raise

    def __call__(self, u: dict) -> None:
        if self._tqdm is not None:
            self._draw_tqdm(u)
        else:
            out = self._file if self._file is not None else sys.stderr
            out.write("\r" + format_update(u) + ("\n" if u["done"] else ""))
            out.flush()

    def _draw_tqdm(self, u: dict) -> None:
        if self._bar is None:
            self._bar = self._tqdm(total=u["total"], initial=u["step"], unit="step", dynamic_ncols=True)
        self._bar.set_description(u["phase"], refresh=False)
        self._bar.set_postfix_str(_latest(u), refresh=False)
        self._bar.update(u["step"] - self._bar.n)
        if u["done"]:
            self._bar.close()
