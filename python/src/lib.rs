//! `import o2o`: o2o from Python, as a thin layer over the `o2o-experiments` library.
//!
//! Nothing here trains, evaluates or checks on its own: [`run::Run`] records the calls a
//! Python user makes and replays them on the Rust builder ([`o2o_experiments::Run`]), the same
//! builder the `o2o` CLI drives; [`dataset::Dataset`] hands NumPy columns to
//! `D4rlDataset::from_columns` (the checks a file read makes); [`policy::Policy`] is the agent
//! of a run's checkpoint, loaded the way `o2o eval` and `o2o export` load it. What this crate
//! adds is the boundary: conversions, exceptions, the GIL and Ctrl-C.
//!
//! - A run trains on a thread of its own while the calling thread waits with the GIL released
//!   and looks at Python's signals every [`run::POLL`]; Ctrl-C asks the runner to stop at its
//!   next safe point (`run::interrupt`), and `KeyboardInterrupt` is raised once the checkpoint
//!   is written, naming the run to resume.
//! - o2o's errors become `o2o.Error` (bad arrays and bad overrides `ValueError`) with the
//!   message the CLI prints, or its subclass for the kind of error (`o2o.BadConfig`, which is
//!   also a `ValueError`, `o2o.BadDataset`, `o2o.DamagedCheckpoint`, `o2o.RunDir`,
//!   `o2o.RunInUse`); a panic becomes `o2o.Error` too, never an abort.
//!
//! The Python-facing documentation is `python/o2o.pyi` and docs/python.md.

use pyo3::prelude::*;

mod convert;
mod dataset;
mod env;
mod errors;
mod outcome;
mod policy;
mod run;

/// The names of the presets embedded in o2o (`o2o train --list-presets`).
#[pyfunction]
fn list_presets() -> Vec<&'static str> {
    o2o_experiments::run::presets::names()
}

/// The native module `o2o._o2o`; the package `o2o` (python/o2o/__init__.py) re-exports it and
/// adds the d3rlpy-style algorithm classes, written in Python over `Run`.
#[pymodule]
#[pyo3(name = "_o2o")]
fn o2o_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("Error", m.py().get_type::<errors::Error>())?;
    m.add("BadConfig", errors::bad_config(m.py())?)?;
    m.add("BadDataset", m.py().get_type::<errors::BadDataset>())?;
    m.add("DamagedCheckpoint", m.py().get_type::<errors::DamagedCheckpoint>())?;
    m.add("RunDir", m.py().get_type::<errors::RunDir>())?;
    m.add("RunInUse", m.py().get_type::<errors::RunInUse>())?;
    m.add_class::<run::Run>()?;
    m.add_class::<outcome::Outcome>()?;
    m.add_class::<dataset::Dataset>()?;
    m.add_class::<policy::Policy>()?;
    m.add_function(wrap_pyfunction!(list_presets, m)?)?;
    m.add_function(wrap_pyfunction!(policy::load_policy, m)?)?;
    m.add_function(wrap_pyfunction!(policy::export, m)?)?;
    // The package's __init__ re-exports these (the version included).
    let all = [
        "Run",
        "Outcome",
        "Dataset",
        "Policy",
        "Error",
        "BadConfig",
        "BadDataset",
        "DamagedCheckpoint",
        "RunDir",
        "RunInUse",
        "list_presets",
        "load_policy",
        "export",
        "__version__",
    ];
    m.add("__all__", all.to_vec())?;
    Ok(())
}
