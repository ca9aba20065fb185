//! The library's error, [`Error`]: a variant to match for each thing a caller can fix — a bad
//! config, bad offline data, a damaged checkpoint, a directory that is not a run, a run in use —
//! printing the message and causes the `o2o` command line prints. Also error text for people:
//! libtorch's C++ exceptions carry a backtrace of C++ frames ("Exception raised from … frame #0:
//! …") after their message; users need the message.
//!
//! Why the variants keep a [`Chain`]: inside, the library works in `anyhow`, each layer adding
//! a line of context, and those lines are what tell a user which file, key or step failed. The
//! place that finds a bad dataset or a damaged checkpoint returns an [`Error`] of that kind (it
//! travels on inside `anyhow` unchanged in print), and the public entry points turn the
//! `anyhow::Error` they end with into an [`Error`] by its outermost typed part — never by its
//! text — keeping every line of it.

use crate::run::interrupt::Interrupted as Stop;
use o2o_agents::AgentError;
use o2o_datasets::DatasetError;
use o2o_envs::EnvError;
use std::fmt;
use std::path::PathBuf;

/// What went wrong in a call of the library ([`Run`](crate::Run) and the other entry points).
/// Its message (`{}`) is the first line the `o2o` command line prints, its
/// [`source`](std::error::Error::source) chain the causes under it (`{:#}` prints all of them on
/// one line, as anyhow does); `?` turns it into an `anyhow::Error`.
///
/// ```no_run
/// use o2o_experiments::{Error, Run};
///
/// match Run::resume("runs/sac-hopper-0-20250101T000000Z").and_then(|r| r.run()) {
///     Ok(done) => println!("{:?}", done.summary.final_eval),
///     Err(Error::RunInUse { holder, .. }) => eprintln!("another process has it: {holder}"),
///     Err(Error::DamagedCheckpoint { path, .. }) => eprintln!("{} cannot be loaded", path.display()),
///     Err(e) => eprintln!("error: {e:#}"),
/// }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A config, preset or override that cannot be used: an unknown preset, a file that is not
    /// TOML, an unknown key, a value out of range, a `--set` that is not `key=value`, an
    /// override of a resumed run.
    BadConfig {
        /// Where the config came from: `preset sac-hopper with --set overrides`, a `.toml` file,
        /// a run's `config.toml`.
        origin: String,
        /// What is wrong, on one line: the messages from where it was found down.
        message: String,
        /// The message and causes as printed.
        chain: Chain,
    },
    /// Offline data that cannot be used: a file or registry id that is missing or unreadable, a
    /// missing key, columns that do not fit the env, in-memory data not handed over, data that
    /// changed since the run started.
    BadDataset {
        /// The data's file or folder, when it has one.
        path: Option<PathBuf>,
        /// What is wrong, on one line: the messages from where it was found down.
        reason: String,
        /// The dataset reader's own error, when it is the cause (its variants name the key,
        /// row and shape).
        error: Option<DatasetError>,
        /// The message and causes as printed.
        chain: Chain,
    },
    /// A checkpoint that cannot be read or loaded: truncated, a file missing, not a checkpoint,
    /// written by another algorithm, its `state.json` unreadable or of another format.
    DamagedCheckpoint {
        /// The checkpoint folder.
        path: PathBuf,
        /// What is wrong, on one line: the messages from where it was found down.
        reason: String,
        /// The message and causes as printed.
        chain: Chain,
    },
    /// A directory that is not a run, or not one that can be used as asked: no readable
    /// `config.toml` or `manifest.json`, no `checkpoints/` folder, no complete checkpoint (or
    /// not the one asked for).
    RunDir {
        /// The directory.
        path: PathBuf,
        /// What is wrong, on one line: the messages from where it was found down.
        reason: String,
        /// The message and causes as printed.
        chain: Chain,
    },
    /// A run that another live process holds (its lock): training, resuming or fine-tuning it.
    RunInUse {
        /// The run directory.
        path: PathBuf,
        /// Who holds it: `pid N on HOST since TIME`.
        holder: String,
        /// The message and causes as printed.
        chain: Chain,
    },
    /// An env that cannot be made or stepped (an unknown id, a missing MuJoCo asset).
    Env {
        /// The env's error.
        error: EnvError,
        /// The message and causes as printed.
        chain: Chain,
    },
    /// An agent that cannot be built or loaded: a checkpoint whose tensors do not fit its
    /// networks (another env's sizes), an invalid agent config.
    Agent {
        /// The agent's error.
        error: AgentError,
        /// The message and causes as printed.
        chain: Chain,
    },
    /// The run stopped on request (Ctrl-C, SIGTERM, [`request`](crate::run::interrupt::request))
    /// with a checkpoint to continue from: `Run::resume(dir)`.
    Interrupted {
        /// The run directory.
        dir: PathBuf,
        /// The checkpoint written when it stopped.
        checkpoint: PathBuf,
        /// The loop step it stopped at.
        step: u64,
        /// The message and causes as printed.
        chain: Chain,
    },
    /// Anything else: a file-system error, a callback's error, an error of your env factory.
    Other(anyhow::Error),
}

/// The message and causes an [`Error`] prints: those of the error it was made from, so that a
/// typed error reads exactly as the untyped one did.
pub struct Chain(anyhow::Error);

impl Chain {
    /// The messages, outermost first.
    pub fn messages(&self) -> impl Iterator<Item = String> + '_ {
        self.0.chain().map(|c| c.to_string())
    }

    /// A copy of `err`'s text, message by message, for an error whose typed part is taken out.
    fn copy_of(err: &anyhow::Error) -> Self {
        let mut texts: Vec<String> = err.chain().map(|c| c.to_string()).collect();
        let mut copy = anyhow::Error::msg(texts.pop().unwrap_or_default());
        while let Some(text) = texts.pop() {
            copy = copy.context(text);
        }
        Self(copy)
    }
}

impl fmt::Debug for Chain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// `$body` with `$printed` bound to what the error prints: every variant's `chain`, `Other`'s
/// error itself (by reference or by mutable reference, as `$error` is).
macro_rules! with_printed {
    ($error:expr, |$printed:ident| $body:expr) => {
        match $error {
            Error::BadConfig { chain: Chain($printed), .. }
            | Error::BadDataset { chain: Chain($printed), .. }
            | Error::DamagedCheckpoint { chain: Chain($printed), .. }
            | Error::RunDir { chain: Chain($printed), .. }
            | Error::RunInUse { chain: Chain($printed), .. }
            | Error::Env { chain: Chain($printed), .. }
            | Error::Agent { chain: Chain($printed), .. }
            | Error::Interrupted { chain: Chain($printed), .. }
            | Error::Other($printed) => $body,
        }
    };
}

impl Error {
    /// A config that cannot be used, from where it came (see [`Error::BadConfig`]).
    pub(crate) fn bad_config(origin: impl Into<String>, err: anyhow::Error) -> Self {
        Self::BadConfig { origin: origin.into(), message: first_lines(&err), chain: Chain(err) }
    }

    /// Offline data that cannot be used (see [`Error::BadDataset`]); the dataset reader's error
    /// is taken out of `err` when it is there.
    pub(crate) fn bad_dataset(path: Option<PathBuf>, err: anyhow::Error) -> Self {
        let reason = first_lines(&err);
        match take::<DatasetError>(err) {
            Ok((error, chain)) => Self::BadDataset { path, reason, error: Some(error), chain },
            Err(err) => Self::BadDataset { path, reason, error: None, chain: Chain(err) },
        }
    }

    /// A checkpoint folder that cannot be read or loaded (see [`Error::DamagedCheckpoint`]).
    pub(crate) fn damaged_checkpoint(path: impl Into<PathBuf>, err: anyhow::Error) -> Self {
        Self::DamagedCheckpoint { path: path.into(), reason: first_lines(&err), chain: Chain(err) }
    }

    /// A directory that is not a usable run (see [`Error::RunDir`]).
    pub(crate) fn run_dir(path: impl Into<PathBuf>, err: anyhow::Error) -> Self {
        Self::RunDir { path: path.into(), reason: first_lines(&err), chain: Chain(err) }
    }

    /// A run held by `holder` (see [`Error::RunInUse`]).
    pub(crate) fn run_in_use(path: impl Into<PathBuf>, holder: impl Into<String>, err: anyhow::Error) -> Self {
        Self::RunInUse { path: path.into(), holder: holder.into(), chain: Chain(err) }
    }

    /// The error and its causes on one line, `a: b: c`, without C++ frames.
    pub fn one_line(&self) -> String {
        first_lines(self.printed())
    }

    /// What this error prints.
    fn printed(&self) -> &anyhow::Error {
        with_printed!(self, |printed| printed)
    }

    /// The same error printing `chain` instead (an error found under context lines).
    fn printing(mut self, text: Chain) -> Self {
        with_printed!(&mut self, |printed| *printed = text.0);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            write!(f, "{:#}", self.printed())
        } else {
            write!(f, "{}", self.printed())
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let printed: &(dyn std::error::Error + 'static) = &**self.printed();
        printed.source()
    }
}

impl From<anyhow::Error> for Error {
    /// The kind of the outermost part of `err` that has one (the layer nearest the caller knows
    /// best what failed): an [`Error`] made where the problem was found, or a stop on request;
    /// else an env's or agent's own error within it; else [`Error::Other`].
    fn from(err: anyhow::Error) -> Self {
        match outermost_mark(&err) {
            Some(Mark::Typed) => retyped(err),
            Some(Mark::Stop { dir, checkpoint, step }) => {
                Self::Interrupted { dir, checkpoint, step, chain: Chain(err) }
            }
            None => match take::<EnvError>(err) {
                Ok((error, chain)) => Self::Env { error, chain },
                Err(err) => match take::<AgentError>(err) {
                    Ok((error, chain)) => Self::Agent { error, chain },
                    Err(err) => Self::Other(err),
                },
            },
        }
    }
}

/// A part of an error chain that says what kind of error it is. (Only error values count: a
/// `.context(…)` value is not a link of the chain anyhow's `chain()` walks.)
enum Mark {
    /// An [`Error`] other than [`Error::Other`].
    Typed,
    /// A run stopped on request.
    Stop { dir: PathBuf, checkpoint: PathBuf, step: u64 },
}

/// The outermost [`Mark`] in `err`'s chain.
fn outermost_mark(err: &anyhow::Error) -> Option<Mark> {
    err.chain().find_map(|c| {
        if c.downcast_ref::<Error>().is_some_and(|e| !matches!(e, Error::Other(_))) {
            Some(Mark::Typed)
        } else {
            c.downcast_ref::<Stop>().map(|s| Mark::Stop {
                dir: s.dir.clone(),
                checkpoint: s.checkpoint.clone(),
                step: s.step,
            })
        }
    })
}

/// The typed [`Error`] within `err`, printing all of `err`; `err` as [`Error::Other`] when
/// anyhow cannot take it out (it is the cause of an error of another type).
fn retyped(err: anyhow::Error) -> Error {
    let at_top = err.chain().next().is_some_and(|c| c.is::<Error>());
    let text = if at_top { None } else { Some(Chain::copy_of(&err)) };
    match err.downcast::<Error>() {
        Ok(typed) => match text {
            Some(text) => typed.printing(text),
            None => typed,
        },
        Err(err) => Error::Other(err),
    }
}

/// `err`'s `E` taken out of it (anyhow reaches one under context lines, not the cause of an
/// error of another type) with a copy of `err`'s text; or `err` back.
fn take<E>(err: anyhow::Error) -> Result<(E, Chain), anyhow::Error>
where
    E: fmt::Display + fmt::Debug + Send + Sync + 'static,
{
    if err.downcast_ref::<E>().is_none() {
        return Err(err);
    }
    let text = Chain::copy_of(&err);
    err.downcast::<E>().map(|e| (e, text))
}

/// The [`Stop`] in `err`: the loop's own, or an [`Error::Interrupted`] a [`Run`](crate::Run)
/// returned (the command line and the Python bindings print the `resume` command from it).
pub fn interrupted(err: &anyhow::Error) -> Option<Stop> {
    err.chain().find_map(|c| match (c.downcast_ref::<Stop>(), c.downcast_ref::<Error>()) {
        (Some(s), _) => Some(Stop { dir: s.dir.clone(), checkpoint: s.checkpoint.clone(), step: s.step }),
        (None, Some(Error::Interrupted { dir, checkpoint, step, .. })) => {
            Some(Stop { dir: dir.clone(), checkpoint: checkpoint.clone(), step: *step })
        }
        _ => None,
    })
}

/// `text` without libtorch's C++ backtrace lines.
pub fn without_cpp_frames(text: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("Exception raised from") || t.starts_with("frame #") {
            break;
        }
        out.push(line);
    }
    let joined = out.join("\n");
    let trimmed = joined.trim_end();
    if trimmed.is_empty() {
        text.lines().next().unwrap_or("").to_string()
    } else {
        trimmed.to_string()
    }
}

/// An error and its causes on one line, `a: b: c`, without C++ frames.
pub fn first_lines(err: &anyhow::Error) -> String {
    err.chain().map(|c| without_cpp_frames(&c.to_string()).replace('\n', " ")).collect::<Vec<_>>().join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::checkpoint::DamagedCheckpoint as DamagedMark;
    use anyhow::Context;

    #[test]
    fn cpp_frames_are_dropped_and_the_message_kept() {
        let text = "PytorchStreamReader failed reading zip archive: failed finding central directory\nException raised from valid at ../caffe2/serialize/inline_container.cc:236 (most recent call first):\nframe #0: c10::Error::Error(...) + 0x9c (0x7f in libc10.so)\nframe #1: ...";
        assert_eq!(
            without_cpp_frames(text),
            "PytorchStreamReader failed reading zip archive: failed finding central directory"
        );
        assert_eq!(without_cpp_frames("plain"), "plain");
    }

    /// Every line an error printed before it was typed, in order, for each way it is typed.
    fn lines(err: &dyn std::error::Error) -> Vec<String> {
        std::iter::successors(Some(err), |e| e.source()).map(|e| e.to_string()).collect()
    }

    #[test]
    fn a_typed_error_under_context_lines_is_found_and_prints_them_all() {
        let found =
            Error::run_dir("runs/x", anyhow::anyhow!("no config.toml").context("runs/x is not a run directory"));
        let err = anyhow::Error::from(found).context("starting from runs/x");
        let before = lines(&*err);
        let typed = Error::from(err);
        assert!(matches!(&typed, Error::RunDir { path, .. } if path.ends_with("runs/x")), "{typed:?}");
        assert_eq!(lines(&typed), before);
        assert_eq!(format!("{typed:#}"), "starting from runs/x: runs/x is not a run directory: no config.toml");
        // And back into anyhow, as the command line gets it: the same lines again.
        assert_eq!(lines(&*anyhow::Error::from(typed)), before);
        // A line added to an `Error` itself (`with_context` on its Result), not to an anyhow.
        let busy: Result<(), Error> = Err(Error::run_in_use("runs/x", "pid 1", anyhow::anyhow!("runs/x is in use")));
        let err = busy.with_context(|| "resuming runs/x").unwrap_err();
        let typed = Error::from(err);
        assert!(matches!(&typed, Error::RunInUse { holder, .. } if holder == "pid 1"), "{typed:?}");
        assert_eq!(format!("{typed:#}"), "resuming runs/x: runs/x is in use");
    }

    #[test]
    fn the_outermost_mark_decides() {
        let inner = Error::bad_config("a file", anyhow::anyhow!("unknown field `x`"));
        let damaged = anyhow::Error::from(inner).context(DamagedMark { path: "ck/step-1".into() });
        let err = anyhow::Error::from(Error::damaged_checkpoint("ck/step-1", damaged)).context("resuming");
        match Error::from(err) {
            Error::DamagedCheckpoint { path, reason, .. } => {
                assert_eq!(path, PathBuf::from("ck/step-1"));
                assert_eq!(reason, "checkpoint ck/step-1 cannot be loaded: unknown field `x`");
            }
            other => panic!("{other:?}"),
        }
        // A mark's context value alone is no error value: not found (so every site makes an Error).
        let context_only = anyhow::anyhow!("truncated").context(DamagedMark { path: "ck/step-1".into() });
        assert!(matches!(Error::from(context_only), Error::Other(_)));
    }

    #[test]
    fn env_and_dataset_errors_are_taken_out_with_their_text() {
        let env = Err::<(), _>(EnvError::UnknownId { id: "Nope-v0".into(), known: vec!["Hopper-v5".into()] })
            .context("making the env Nope-v0")
            .unwrap_err();
        let before = lines(&*env);
        let typed = Error::from(env);
        assert!(matches!(&typed, Error::Env { error: EnvError::UnknownId { id, .. }, .. } if id == "Nope-v0"));
        assert_eq!(lines(&typed), before);
        let bad =
            Err::<(), _>(DatasetError::Invalid("no rows".into())).context("reading the dataset d.hdf5").unwrap_err();
        let typed = Error::bad_dataset(Some("d.hdf5".into()), bad);
        assert!(matches!(&typed, Error::BadDataset { error: Some(DatasetError::Invalid(_)), .. }), "{typed:?}");
        assert_eq!(typed.one_line(), "reading the dataset d.hdf5: invalid argument: no rows");
        // Nothing typed: the error as it is.
        assert!(matches!(Error::from(anyhow::anyhow!("disk full")), Error::Other(_)));
    }

    #[test]
    fn a_stop_is_found_in_either_form() {
        let stop = Stop { dir: "runs/r".into(), checkpoint: "runs/r/checkpoints/step-5".into(), step: 5 };
        let raw = anyhow::Error::from(stop);
        assert_eq!(interrupted(&raw).map(|s| s.step), Some(5));
        let typed = anyhow::Error::from(Error::from(raw));
        assert_eq!(interrupted(&typed).map(|s| s.step), Some(5));
        assert!(interrupted(&anyhow::anyhow!("no")).is_none());
    }
}
