"""Progress from Python: updates handed to a callable, the notebook bar through `sys.stderr`
(where a Jupyter cell sees it) or through `tqdm.auto`, and "auto" choosing it inside a kernel."""

import io
import sys
import time
import types

import pytest

import o2o
from conftest import without_timing
from o2o import _progress


def test_a_callable_gets_every_update_in_order_and_a_final_one(iql):
    updates = []
    done = iql.progress(updates.append, every=0).fit(300)
    assert done.summary["finished"] is True
    assert updates, "no progress update reached the callable"
    steps = [u["step"] for u in updates]
    assert steps == sorted(steps) and steps[-1] == 300
    assert all(u["total"] == 300 and u["phase"] == "offline" for u in updates)
    assert [u["done"] for u in updates].count(True) == 1 and updates[-1]["done"] is True
    last = updates[-1]
    assert last["steps_per_s"] > 0 and last["eta_s"] is not None
    # The latest evaluation rides along once one has run (every 100 steps).
    evals = [r["eval/return"] for r in done.metrics if "eval/return" in r]
    assert last["eval_return"] == pytest.approx(evals[-1])
    assert set(last) == {
        "step", "total", "phase", "steps_per_s", "eta_s", "train_return", "eval_return", "eval_score", "done"
    }


def test_progress_does_not_change_what_a_run_learns(iql, tmp_path):
    quiet = iql.seed(5).fit(200).metrics
    shown = iql.seed(5).progress(lambda u: None, every=0).runs_dir(tmp_path / "shown").fit(200).metrics
    assert without_timing(quiet) == without_timing(shown)


def test_an_exception_in_the_callable_is_reported_and_the_run_goes_on(iql):
    calls = []
    seen = []

    def broken(u):
        calls.append(u)
        raise RuntimeError("progress display broke")

    old = sys.unraisablehook
    sys.unraisablehook = lambda info: seen.append(info)
    try:
        done = iql.progress(broken, every=0).fit(200)
    finally:
        sys.unraisablehook = old
    assert done.summary["finished"] is True and done.summary["steps"] == 200
    assert len(calls) == 1, "the callable was called again after it raised"
    assert len(seen) == 1 and "progress display broke" in str(seen[0].exc_value)


def test_the_notebook_bar_writes_through_sys_stderr(iql, capsys):
    done = iql.progress("notebook", every=0).fit(200)
    assert done.summary["finished"] is True
    err = capsys.readouterr().err
    # capsys sees only what goes through Python's sys.stderr, as a Jupyter cell does.
    assert "step 200/200 (offline)" in err and "steps/s" in err, err[-500:]
    assert err.count("\r") >= 2 and err.endswith("\n")


def test_the_notebook_bar_drives_tqdm_auto_when_installed(monkeypatch):
    bars = []

    class FakeTqdm:
        def __init__(self, total, initial, **kw):
            self.total, self.n, self.closed, self.desc, self.postfix = total, initial, False, None, None
            bars.append(self)

        def set_description(self, d, refresh=True):
            self.desc = d

        def set_postfix_str(self, s, refresh=True):
            self.postfix = s

        def update(self, k):
            self.n += k

        def close(self):
            self.closed = True

    auto = types.ModuleType("tqdm.auto")
    auto.tqdm = FakeTqdm
    monkeypatch.setitem(sys.modules, "tqdm", types.ModuleType("tqdm"))
    monkeypatch.setitem(sys.modules, "tqdm.auto", auto)
    bar = _progress.NotebookBar()
    base = dict(total=10, phase="online", steps_per_s=5.0, eta_s=1.0, train_return=None, eval_score=None)
    bar(dict(base, step=4, eval_return=None, done=False))
    bar(dict(base, step=10, eval_return=3.25, done=True))
    assert len(bars) == 1 and bars[0].n == 10 and bars[0].total == 10 and bars[0].closed
    assert bars[0].desc == "online" and bars[0].postfix == "eval return 3.2"


def test_auto_chooses_the_notebook_bar_inside_a_jupyter_kernel(iql, monkeypatch, capsys):
    assert _progress.in_notebook() is False
    shell = types.SimpleNamespace(kernel=object())
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    assert _progress.in_notebook() is True
    iql.progress("auto", every=0).fit(100)
    assert "step 100/100 (offline)" in capsys.readouterr().err
    # An explicit mode is kept: "off" stays quiet in a notebook.
    iql.progress("off").fit(100)
    assert capsys.readouterr().err.count("step 100/100") == 0


def test_auto_in_a_kernel_redraws_the_bar_twice_a_second_unless_told(iql, monkeypatch):
    # The bar's cadence is decided where the updates go: a notebook bar is redrawn every 0.5 s
    # (a terminal's plain lines come every 30 s) when `every` is not given.
    shell = types.SimpleNamespace(kernel=object())
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    updates = []

    class Recording:
        def __call__(self, update):
            updates.append(update)

    monkeypatch.setattr(_progress, "NotebookBar", Recording)
    # Three evaluations that each take 0.6 s make the run last at least 1.8 s.
    iql.on_eval(lambda result, state: time.sleep(0.6)).progress("auto").fit(300)
    assert updates and updates[-1]["done"] is True
    assert len([u for u in updates if not u["done"]]) >= 2, updates


def test_format_update_and_bad_modes():
    u = dict(step=1200, total=5000, phase="online", steps_per_s=350.4, eta_s=190.0,
             train_return=12.34, eval_return=56.78, eval_score=41.0, done=False)
    assert _progress.format_update(u) == (
        "step 1200/5000 (online) · 350 steps/s · train return 12.3 · eval return 56.8 (score 41.0) · ETA 3m10s"
    )
    out = io.StringIO()
    _progress.NotebookBar(use_tqdm=False, file=out)(dict(u, done=True))
    assert out.getvalue().startswith("\rstep 1200/5000") and out.getvalue().endswith("\n")
    run = o2o.Run.from_toml("x", "algo = 'iql'\nenv = 'InvertedPendulum-v5'\n")
    with pytest.raises(ValueError, match="expected auto, bar, plain, notebook, off or a callable"):
        run.progress("fancy")
    with pytest.raises(ValueError, match="expected auto, bar, plain, notebook, off or a callable"):
        run.progress(3)
    with pytest.raises(ValueError, match="seconds"):
        run.progress("plain", every=-1)
