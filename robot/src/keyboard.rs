//! The keyboard operator: a person at the robot's terminal takes over from the policy, nudges
//! joints or end-effector axes, labels success or failure, confirms episode resets, clears a
//! safety latch and presses the e-stop, through `crossterm`'s raw-mode key events.
//!
//! Keys ([`key_action`] is the whole map; `[operator] kind = "keyboard"` selects it):
//!
//! | key | action |
//! |---|---|
//! | `Space` | take over from the policy / hand back to it |
//! | `q`/`a`, `w`/`s`, `e`/`d`, `r`/`f`, `t`/`g`, `y`/`h`, `u`/`j` | nudge action dimension 0…6 up / down (joints in joint mode) |
//! | `↑`/`↓`, `→`/`←`, `PgUp`/`PgDn` | nudge dimension 0 (x), 1 (y), 2 (z) up / down (end-effector axes) |
//! | `o` | label the episode a success |
//! | `x` | label it a failure |
//! | `Enter` | confirm the reset (the scene is ready for the next episode) |
//! | `c` | clear the safety latch at a reset (you have checked the arm) |
//! | `Esc` | e-stop (latched until cleared with `c`) |
//! | `Ctrl-C` | e-stop, and stop the run at the next reset |
//!
//! While taken over, each step executes the nudges pressed since the previous step (`nudge` env
//! units per press and dimension, summed; a held key repeats), and zero — hold — when none was
//! pressed; the envelope checks the result like any policy action. A nudge key pressed while
//! the policy drives takes over at once. Raw mode turns Ctrl-C into a key, so the map handles
//! it: the arm stops and the run ends at the next reset instead of the process dying with the
//! arm under way.
//!
//! The reader is a thread forwarding key presses into a channel; [`KeyboardOperator`] drains the
//! channel at every step. Tests feed synthetic events into the same channel
//! ([`KeyboardOperator::from_channel`]), so no terminal is needed.

use crate::guard::Latch;
use crate::intervention::{Operator, ResetDecision};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAction {
    /// Take over / hand back.
    ToggleTakeover,
    /// Nudge action dimension `dim` by `sign` × nudge.
    Nudge {
        /// The action dimension.
        dim: usize,
        /// +1 or −1.
        sign: i8,
    },
    /// Label success (`true`) or failure.
    Label(bool),
    /// Confirm the reset.
    ConfirmReset,
    /// Clear the latch at the reset.
    ClearLatch,
    /// E-stop.
    EStop,
    /// E-stop and end the run at the next reset.
    Abort,
}

/// The key map (see the module docs). Only presses and repeats act; releases do nothing.
pub fn key_action(key: &KeyEvent) -> Option<KeyAction> {
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let nudge = |dim, sign| Some(KeyAction::Nudge { dim, sign });
    match key.code {
        KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Some(KeyAction::Abort),
        KeyCode::Char(' ') => Some(KeyAction::ToggleTakeover),
        KeyCode::Char(ch) => {
            let ch = ch.to_ascii_lowercase();
            if let Some(dim) = "qwertyu".find(ch) {
                return nudge(dim, 1);
            }
            if let Some(dim) = "asdfghj".find(ch) {
                return nudge(dim, -1);
            }
            match ch {
                'o' => Some(KeyAction::Label(true)),
                'x' => Some(KeyAction::Label(false)),
                'c' => Some(KeyAction::ClearLatch),
                _ => None,
            }
        }
        KeyCode::Up => nudge(0, 1),
        KeyCode::Down => nudge(0, -1),
        KeyCode::Right => nudge(1, 1),
        KeyCode::Left => nudge(1, -1),
        KeyCode::PageUp => nudge(2, 1),
        KeyCode::PageDown => nudge(2, -1),
        KeyCode::Enter => Some(KeyAction::ConfirmReset),
        KeyCode::Esc => Some(KeyAction::EStop),
        _ => None,
    }
}

/// The `[operator]` settings of `kind = "keyboard"`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KeyboardConfig {
    /// One nudge, in the env's action units (rad or m per step); the envelope clips the sum.
    pub nudge: f32,
    /// How long a reset waits for `Enter` (or `c`) before the run stops (s); 0: forever.
    pub reset_timeout_s: f64,
}

impl Default for KeyboardConfig {
    fn default() -> Self {
        Self { nudge: 0.01, reset_timeout_s: 0.0 }
    }
}

/// A person at the keyboard (see the module docs).
pub struct KeyboardOperator {
    config: KeyboardConfig,
    keys: Receiver<KeyEvent>,
    takeover: bool,
    nudges: Vec<(usize, i8)>,
    label: Option<bool>,
    estop: bool,
    abort: bool,
    reader: Option<TerminalReader>,
}

/// The raw-mode terminal and the thread reading its keys; raw mode ends when dropped.
struct TerminalReader {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Drop for TerminalReader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// Write an operator message on its own line (raw mode needs the `\r`).
fn say(message: &str) {
    eprint!("\r\noperator: {message}\r\n");
}

impl KeyboardOperator {
    /// The operator on this process's terminal: raw mode on, a thread reading keys. An error
    /// when stdin is not a terminal.
    pub fn terminal(config: KeyboardConfig) -> Result<Self, String> {
        use std::io::IsTerminal;
        if !std::io::stdin().is_terminal() {
            return Err("operator.kind = \"keyboard\" needs a terminal on stdin (run o2o in a terminal, not under a pipe or a service)".into());
        }
        crossterm::terminal::enable_raw_mode()
            .map_err(|e| format!("operator.kind = \"keyboard\": cannot put the terminal in raw mode: {e}"))?;
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("o2o-robot-keyboard".into())
            .spawn(move || read_keys(tx, flag))
            .map_err(|e| format!("cannot start the keyboard reader: {e}"))?;
        say("keyboard operator ready: Space take over/release, q/a w/s e/d … or arrows/PgUp/PgDn nudge, o success, x failure, Enter confirm reset, c clear latch, Esc e-stop, Ctrl-C stop");
        let mut op = Self::from_channel(config, rx);
        op.reader = Some(TerminalReader { stop, handle: Some(handle) });
        Ok(op)
    }

    /// The operator on a channel of key events (tests, or another key source).
    pub fn from_channel(config: KeyboardConfig, keys: Receiver<KeyEvent>) -> Self {
        Self {
            config,
            keys,
            takeover: false,
            nudges: Vec::new(),
            label: None,
            estop: false,
            abort: false,
            reader: None,
        }
    }

    /// Whether the operator drives now.
    pub fn is_taking_over(&self) -> bool {
        self.takeover
    }

    /// Apply one key.
    fn apply(&mut self, key: &KeyEvent) {
        let Some(action) = key_action(key) else { return };
        match action {
            KeyAction::ToggleTakeover => {
                self.takeover = !self.takeover;
                self.nudges.clear();
                say(if self.takeover { "took over" } else { "handed back to the policy" });
            }
            KeyAction::Nudge { dim, sign } => {
                self.takeover = true;
                self.nudges.push((dim, sign));
            }
            KeyAction::Label(l) => {
                self.label = Some(l);
                say(if l { "labelled success" } else { "labelled failure" });
            }
            KeyAction::EStop => {
                self.estop = true;
                say("E-STOP");
            }
            KeyAction::Abort => {
                self.estop = true;
                self.abort = true;
                say("E-STOP; the run stops at the next reset");
            }
            // Only meaningful while a reset waits (see `confirm_reset`).
            KeyAction::ConfirmReset | KeyAction::ClearLatch => {}
        }
    }

    /// Apply every key pressed since the last call.
    fn drain(&mut self) {
        while let Ok(k) = self.keys.try_recv() {
            self.apply(&k);
        }
    }
}

/// The reader thread: key presses (and repeats) into `tx` until `stop` or the receiver is gone.
fn read_keys(tx: Sender<KeyEvent>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match crossterm::event::poll(Duration::from_millis(20)) {
            Ok(true) => {
                if let Ok(Event::Key(k)) = crossterm::event::read() {
                    if tx.send(k).is_err() {
                        return;
                    }
                }
            }
            Ok(false) => {}
            Err(_) => return,
        }
    }
}

impl Operator for KeyboardOperator {
    fn intervene(&mut self, _step: u64, _obs: &[f32], proposed: &[f32]) -> Option<Vec<f32>> {
        self.drain();
        if !self.takeover {
            return None;
        }
        let mut a = vec![0.0; proposed.len()];
        for (dim, sign) in self.nudges.drain(..) {
            if let Some(v) = a.get_mut(dim) {
                *v += f32::from(sign) * self.config.nudge;
            }
        }
        Some(a)
    }

    fn label(&mut self, _step: u64, _obs: &[f32]) -> Option<bool> {
        self.drain();
        self.label.take()
    }

    fn estop(&mut self, _step: u64) -> bool {
        self.drain();
        std::mem::take(&mut self.estop)
    }

    /// Wait for `Enter` (no latch) or `c` (latch set: the operator has checked the arm),
    /// pressed after the prompt (an `Enter` typed ahead does not confirm a scene nobody has
    /// looked at); `Ctrl-C` or the timeout stops the run. Other keys are applied as usual.
    fn confirm_reset(&mut self, episode: u64, latch: Option<&Latch>) -> ResetDecision {
        self.drain();
        self.takeover = false;
        self.nudges.clear();
        self.label = None;
        match latch {
            None => say(&format!("episode {episode}: set the scene up, then Enter (Ctrl-C stops the run)")),
            Some(l) => say(&format!(
                "episode {episode}: SAFETY LATCH: {l}. Check the arm, then c to clear it (Ctrl-C stops the run)"
            )),
        }
        let deadline = (self.config.reset_timeout_s > 0.0)
            .then(|| Instant::now() + Duration::from_secs_f64(self.config.reset_timeout_s));
        loop {
            if self.abort {
                return ResetDecision::Abort("the operator pressed Ctrl-C".into());
            }
            let key = match deadline {
                Some(d) => self.keys.recv_timeout(d.saturating_duration_since(Instant::now())),
                None => self.keys.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            let key = match key {
                Ok(k) => k,
                Err(RecvTimeoutError::Timeout) => {
                    return ResetDecision::Abort(format!(
                        "no operator confirmed the reset within {} s",
                        self.config.reset_timeout_s
                    ))
                }
                Err(RecvTimeoutError::Disconnected) => return ResetDecision::Abort("the keyboard is gone".into()),
            };
            match (key_action(&key), latch) {
                (Some(KeyAction::ConfirmReset), None) => return ResetDecision::Go,
                (Some(KeyAction::ClearLatch), Some(_)) => return ResetDecision::ClearLatch,
                (Some(KeyAction::ConfirmReset), Some(_)) => {
                    say("the latch is set: c clears it (after checking the arm)")
                }
                _ => self.apply(&key),
            }
            // An e-stop pressed while waiting stays pending for the next step.
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    #[test]
    fn the_key_map_covers_every_action() {
        assert_eq!(key_action(&key(KeyCode::Char(' '))), Some(KeyAction::ToggleTakeover));
        assert_eq!(key_action(&key(KeyCode::Char('q'))), Some(KeyAction::Nudge { dim: 0, sign: 1 }));
        assert_eq!(
            key_action(&key(KeyCode::Char('J'))),
            Some(KeyAction::Nudge { dim: 6, sign: -1 }),
            "shift does not matter"
        );
        assert_eq!(key_action(&key(KeyCode::Char('e'))), Some(KeyAction::Nudge { dim: 2, sign: 1 }));
        assert_eq!(key_action(&key(KeyCode::PageDown)), Some(KeyAction::Nudge { dim: 2, sign: -1 }));
        assert_eq!(key_action(&key(KeyCode::Left)), Some(KeyAction::Nudge { dim: 1, sign: -1 }));
        assert_eq!(key_action(&key(KeyCode::Char('o'))), Some(KeyAction::Label(true)));
        assert_eq!(key_action(&key(KeyCode::Char('x'))), Some(KeyAction::Label(false)));
        assert_eq!(key_action(&key(KeyCode::Enter)), Some(KeyAction::ConfirmReset));
        assert_eq!(key_action(&key(KeyCode::Char('c'))), Some(KeyAction::ClearLatch));
        assert_eq!(key_action(&KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)), Some(KeyAction::Abort));
        assert_eq!(key_action(&key(KeyCode::Esc)), Some(KeyAction::EStop));
        assert_eq!(key_action(&key(KeyCode::Char('z'))), None);
        let mut release = key(KeyCode::Esc);
        release.kind = KeyEventKind::Release;
        assert_eq!(key_action(&release), None, "releases do nothing");
    }

    #[test]
    fn synthetic_keys_drive_takeover_nudges_labels_and_the_estop() {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut op = KeyboardOperator::from_channel(KeyboardConfig { nudge: 0.02, reset_timeout_s: 0.0 }, rx);
        let proposed = [0.5f32, 0.5, 0.5];
        assert_eq!(op.intervene(0, &[], &proposed), None, "the policy drives");
        tx.send(key(KeyCode::Char(' '))).unwrap();
        assert_eq!(op.intervene(1, &[], &proposed), Some(vec![0.0, 0.0, 0.0]), "taken over: hold");
        for k in [KeyCode::Up, KeyCode::Up, KeyCode::Char('s'), KeyCode::PageUp] {
            tx.send(key(k)).unwrap();
        }
        assert_eq!(op.intervene(2, &[], &proposed), Some(vec![0.04, -0.02, 0.02]));
        assert_eq!(op.intervene(3, &[], &proposed), Some(vec![0.0, 0.0, 0.0]), "nudges act once");
        tx.send(key(KeyCode::Char('u'))).unwrap();
        assert_eq!(
            op.intervene(4, &[], &proposed),
            Some(vec![0.0, 0.0, 0.0]),
            "a dimension the action lacks is ignored"
        );
        tx.send(key(KeyCode::Char(' '))).unwrap();
        assert_eq!(op.intervene(5, &[], &proposed), None, "handed back");
        tx.send(key(KeyCode::Char('d'))).unwrap();
        assert_eq!(op.intervene(6, &[], &proposed), Some(vec![0.0, 0.0, -0.02]), "a nudge takes over at once");
        assert!(op.is_taking_over());
        tx.send(key(KeyCode::Char('o'))).unwrap();
        assert_eq!(op.label(7, &[]), Some(true));
        assert_eq!(op.label(8, &[]), None, "a label is given once");
        tx.send(key(KeyCode::Char('x'))).unwrap();
        assert_eq!(op.label(9, &[]), Some(false));
        assert!(!op.estop(10));
        tx.send(key(KeyCode::Esc)).unwrap();
        assert!(op.estop(11));
        assert!(!op.estop(12), "reported once; the guard latches it");
    }

    #[test]
    fn resets_wait_for_the_operator() {
        let (tx, rx) = std::sync::mpsc::channel();
        let mut op = KeyboardOperator::from_channel(KeyboardConfig { nudge: 0.02, reset_timeout_s: 0.2 }, rx);
        // Keys pressed after the prompt (a person at the keyboard, on another thread).
        let later = |keys: Vec<KeyCode>| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                keys.into_iter().for_each(|k| tx.send(key(k)).unwrap());
            })
        };
        tx.send(key(KeyCode::Char(' '))).unwrap();
        let typed = later(vec![KeyCode::Char('z'), KeyCode::Enter]);
        assert_eq!(op.confirm_reset(0, None), ResetDecision::Go);
        typed.join().unwrap();
        assert_eq!(op.intervene(0, &[], &[0.1]), None, "a reset hands back to the policy");
        let latch = Latch::EStop { reason: "operator e-stop".into() };
        // Enter does not clear a latch; c does.
        let typed = later(vec![KeyCode::Enter, KeyCode::Char('c')]);
        assert_eq!(op.confirm_reset(1, Some(&latch)), ResetDecision::ClearLatch);
        typed.join().unwrap();
        // An Enter typed ahead does not confirm; nobody there: the timeout stops the run.
        tx.send(key(KeyCode::Enter)).unwrap();
        let t = Instant::now();
        assert!(matches!(op.confirm_reset(2, None), ResetDecision::Abort(why) if why.contains("within 0.2 s")));
        assert!(t.elapsed() >= Duration::from_millis(200));
        // Ctrl-C: e-stop now, the run stops at the next reset.
        tx.send(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)).unwrap();
        assert!(op.estop(3));
        assert!(matches!(op.confirm_reset(3, None), ResetDecision::Abort(why) if why.contains("Ctrl-C")));
    }
}
