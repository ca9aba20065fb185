//! A client for the released Robo-Dopamine General Reward Model (GRM) served behind an
//! OpenAI-compatible chat endpoint, the way vLLM serves it
//! (`vllm serve tanhuajie2001/Robo-Dopamine-GRM-3B`).
//!
//! Interface (`FlagOpen/Robo-Dopamine@7d4415f examples/inference.py`, restated): one user
//! message with the task text and **8 images in a fixed order** —
//! 1 reference START (front camera, this episode's first frame), 2 reference END (goal image,
//! else the last front frame), 3–5 BEFORE front / left wrist / right wrist, 6–8 AFTER front /
//! left wrist / right wrist. The answer is text ending in `<score>±NN%</score>`; the hop is the
//! last score tag's number, clipped to [−100, 100] and divided by 100. A reply without a
//! readable tag counts as hop 0 and increments a warning counter.
//!
//! Modes (one call per consecutive pair of sampled frames): incremental (BEFORE = previous
//! frame), forward (BEFORE = first frame), backward (BEFORE = the goal image in all three slots);
//! see [`GrmRequest`]'s constructors and [`crate::reconstruct`] for turning hops into Φ.
//!
//! Requests time out, are retried with exponential backoff on transport errors, timeouts,
//! 429 and 5xx, and can go through a [`GrmQueue`]: a bounded queue served by a worker thread,
//! whose `try_submit` never blocks, so a slow server never stalls a control loop.
//!
//! The default prompt is o2o's own wording of the documented structure. The released model
//! was trained with the prompt in its repository's data script; for the closest match, put that
//! text in a file and pass it as [`GrmConfig::prompt`] (`{task}` marks the task text, `<image>`
//! the 8 image slots).

use crate::RewardModelError;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::time::Duration;

/// The default prompt: `{task}` is replaced by the task text, each `<image>` by one image.
pub const DEFAULT_PROMPT: &str = "You judge a robot's progress on a task from camera images.\n\
Task: {task}\n\
Reference images, for anchoring only:\n\
- REFERENCE START, front camera (task just starting): <image>\n\
- REFERENCE END, front camera (task completed): <image>\n\
BEFORE front: <image>\nBEFORE left wrist: <image>\nBEFORE right wrist: <image>\n\
AFTER front: <image>\nAFTER left wrist: <image>\nAFTER right wrist: <image>\n\
Does AFTER move closer to completing \"{task}\" than BEFORE? Answer with an integer percentage in \
[-100%, +100%]: an improvement as a share of what remained from BEFORE to the end, a regression as \
a share of the progress BEFORE had made since the start, 0% if unchanged. Reply with one line: \
<score>+NN%</score> or <score>-NN%</score> or <score>0%</score>";

/// Client settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GrmConfig {
    /// Full URL of the chat-completions endpoint.
    pub url: String,
    /// Model name as the server knows it.
    pub model: String,
    /// Bearer token, if the server wants one.
    pub api_key: Option<String>,
    /// Per-attempt timeout, seconds.
    pub timeout_s: f64,
    /// Retries after the first attempt.
    pub retries: u32,
    /// First backoff, seconds; doubled after each failed attempt.
    pub backoff_s: f64,
    /// Sampling temperature (0.1 in the released inference).
    pub temperature: f64,
    /// Nucleus p (0.9).
    pub top_p: f64,
    /// Top-k (50; a vLLM extension of the OpenAI schema).
    pub top_k: i64,
    /// Completion token limit (1024).
    pub max_tokens: u32,
    /// Requests a [`GrmQueue`] holds before `try_submit` refuses.
    pub queue_capacity: usize,
    /// Prompt template; `None` = [`DEFAULT_PROMPT`].
    pub prompt: Option<String>,
}

impl Default for GrmConfig {
    fn default() -> Self {
        Self {
            url: "http://127.0.0.1:8000/v1/chat/completions".into(),
            model: "tanhuajie2001/Robo-Dopamine-GRM-3B".into(),
            api_key: None,
            timeout_s: 60.0,
            retries: 2,
            backoff_s: 0.5,
            temperature: 0.1,
            top_p: 0.9,
            top_k: 50,
            max_tokens: 1024,
            queue_capacity: 8,
            prompt: None,
        }
    }
}

/// One encoded image (PNG or JPEG bytes as read from a file or a camera driver).
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// MIME type, e.g. `image/png`.
    pub mime: String,
    /// The encoded bytes.
    pub bytes: Vec<u8>,
}

impl Image {
    /// PNG bytes.
    pub fn png(bytes: Vec<u8>) -> Self {
        Self { mime: "image/png".into(), bytes }
    }

    /// JPEG bytes.
    pub fn jpeg(bytes: Vec<u8>) -> Self {
        Self { mime: "image/jpeg".into(), bytes }
    }

    fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime, base64::engine::general_purpose::STANDARD.encode(&self.bytes))
    }
}

/// The three camera views of one state: front, left wrist, right wrist.
#[derive(Debug, Clone, PartialEq)]
pub struct Views {
    /// Front (scene) camera.
    pub front: Image,
    /// Left wrist camera.
    pub left_wrist: Image,
    /// Right wrist camera (a single-arm robot repeats a view, as the released benchmark does).
    pub right_wrist: Image,
}

impl Views {
    /// The three views from PNG bytes in the GRM's order (front, left wrist, right wrist), e.g.
    /// the MuJoCo renders of `FetchEnv::render_views` (o2o-envs feature `render`).
    pub fn from_pngs([front, left_wrist, right_wrist]: [Vec<u8>; 3]) -> Self {
        Self { front: Image::png(front), left_wrist: Image::png(left_wrist), right_wrist: Image::png(right_wrist) }
    }
}

/// One GRM query: the task text and the 8 images in the documented order.
#[derive(Debug, Clone, PartialEq)]
pub struct GrmRequest {
    /// Task text.
    pub task: String,
    /// START, END, BEFORE ×3, AFTER ×3.
    pub images: [Image; 8],
}

impl GrmRequest {
    /// BEFORE and AFTER given explicitly (incremental mode: BEFORE = the previous sampled frame;
    /// forward mode: BEFORE = the first frame).
    pub fn new(task: &str, start: Image, end: Image, before: Views, after: Views) -> Self {
        Self {
            task: task.into(),
            images: [
                start,
                end,
                before.front,
                before.left_wrist,
                before.right_wrist,
                after.front,
                after.left_wrist,
                after.right_wrist,
            ],
        }
    }

    /// Backward mode: the goal image in all three BEFORE slots.
    pub fn backward(task: &str, start: Image, goal: Image, after: Views) -> Self {
        let before = Views { front: goal.clone(), left_wrist: goal.clone(), right_wrist: goal.clone() };
        Self::new(task, start, goal, before, after)
    }
}

/// A scored answer.
#[derive(Debug, Clone, PartialEq)]
pub struct GrmScore {
    /// Hop in [−1, 1] (0 when the reply had no readable score).
    pub hop: f64,
    /// Whether a score tag was read.
    pub parsed: bool,
    /// The reply text.
    pub text: String,
    /// HTTP attempts it took.
    pub attempts: u32,
}

/// The hop in a reply: the **last** `<score>…</score>` tag, `%` stripped, clipped to
/// [−100, 100], divided by 100. `None` when there is no readable tag.
pub fn parse_score(text: &str) -> Option<f64> {
    let open = text.rfind("<score>")?;
    let rest = &text[open + "<score>".len()..];
    let close = rest.find("</score>")?;
    let inner = rest[..close].trim().trim_end_matches('%').trim();
    let v: f64 = inner.parse().ok()?;
    if !v.is_finite() {
        return None;
    }
    Some(v.clamp(-100.0, 100.0) / 100.0)
}

/// Blocking client; cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct GrmClient {
    config: GrmConfig,
    agent: ureq::Agent,
    parse_failures: AtomicU64,
}

enum Attempt {
    Done(String),
    Retry(RewardModelError),
    Fail(RewardModelError),
}

impl GrmClient {
    /// A client for `config`; checks the prompt has 8 image slots.
    pub fn new(config: GrmConfig) -> Result<Self, RewardModelError> {
        let slots = config.prompt.as_deref().unwrap_or(DEFAULT_PROMPT).matches("<image>").count();
        if slots != 8 {
            return Err(RewardModelError::Config {
                key: "grm.prompt".into(),
                expected: "exactly 8 `<image>` slots".into(),
                found: slots.to_string(),
            });
        }
        if !(config.timeout_s > 0.0 && config.timeout_s.is_finite()) {
            return Err(RewardModelError::Config {
                key: "grm.timeout_s".into(),
                expected: "> 0".into(),
                found: config.timeout_s.to_string(),
            });
        }
        if !(config.backoff_s >= 0.0 && config.backoff_s.is_finite()) {
            return Err(RewardModelError::Config {
                key: "grm.backoff_s".into(),
                expected: "≥ 0".into(),
                found: config.backoff_s.to_string(),
            });
        }
        if config.queue_capacity == 0 {
            return Err(RewardModelError::Config {
                key: "grm.queue_capacity".into(),
                expected: "≥ 1".into(),
                found: "0".into(),
            });
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs_f64(config.timeout_s)))
            .build()
            .into();
        Ok(Self { config, agent, parse_failures: AtomicU64::new(0) })
    }

    /// The settings.
    pub fn config(&self) -> &GrmConfig {
        &self.config
    }

    /// Replies that had no readable score tag so far.
    pub fn parse_failures(&self) -> u64 {
        self.parse_failures.load(Ordering::Relaxed)
    }

    /// The chat-completions body for `req`.
    pub fn body(&self, req: &GrmRequest) -> serde_json::Value {
        let template = self.config.prompt.as_deref().unwrap_or(DEFAULT_PROMPT).replace("{task}", &req.task);
        let mut content = Vec::new();
        for (i, piece) in template.split("<image>").enumerate() {
            if i > 0 {
                content.push(
                    serde_json::json!({ "type": "image_url", "image_url": { "url": req.images[i - 1].data_url() } }),
                );
            }
            if !piece.is_empty() {
                content.push(serde_json::json!({ "type": "text", "text": piece }));
            }
        }
        serde_json::json!({
            "model": self.config.model,
            "messages": [{ "role": "user", "content": content }],
            "temperature": self.config.temperature,
            "top_p": self.config.top_p,
            "top_k": self.config.top_k,
            "max_tokens": self.config.max_tokens,
        })
    }

    /// Ask the server for the hop of `req`, with retries and backoff.
    pub fn score(&self, req: &GrmRequest) -> Result<GrmScore, RewardModelError> {
        let body = self.body(req).to_string();
        let mut backoff = self.config.backoff_s;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.attempt(&body) {
                Attempt::Done(text) => {
                    let parsed = parse_score(&text);
                    if parsed.is_none() {
                        let n = self.parse_failures.fetch_add(1, Ordering::Relaxed) + 1;
                        tracing::warn!(failures = n, "reward-model reply has no readable <score> tag; using hop 0");
                    }
                    return Ok(GrmScore {
                        hop: parsed.unwrap_or(0.0),
                        parsed: parsed.is_some(),
                        text,
                        attempts: attempt,
                    });
                }
                Attempt::Fail(e) => return Err(e),
                Attempt::Retry(e) if attempt > self.config.retries => return Err(e),
                Attempt::Retry(_) => {
                    std::thread::sleep(Duration::from_secs_f64(backoff));
                    backoff *= 2.0;
                }
            }
        }
    }

    fn attempt(&self, body: &str) -> Attempt {
        let url = &self.config.url;
        let server = |message: String| RewardModelError::Server { url: url.clone(), message };
        let mut call = self.agent.post(url).header("Content-Type", "application/json");
        if let Some(key) = &self.config.api_key {
            call = call.header("Authorization", format!("Bearer {key}"));
        }
        let mut resp = match call.send(body) {
            Ok(r) => r,
            Err(e) if is_timeout(&e) => {
                return Attempt::Retry(RewardModelError::Timeout { url: url.clone(), secs: self.config.timeout_s })
            }
            Err(e) => return Attempt::Retry(server(e.to_string())),
        };
        let status = resp.status().as_u16();
        let text = match resp.body_mut().read_to_string() {
            Ok(t) => t,
            Err(e) if is_timeout(&e) => {
                return Attempt::Retry(RewardModelError::Timeout { url: url.clone(), secs: self.config.timeout_s })
            }
            Err(e) => return Attempt::Retry(server(format!("reading the reply: {e}"))),
        };
        if status == 429 || status >= 500 {
            return Attempt::Retry(server(format!("HTTP {status}")));
        }
        if status != 200 {
            return Attempt::Fail(server(format!("HTTP {status}: {}", text.chars().take(200).collect::<String>())));
        }
        #[derive(Deserialize)]
        struct Reply {
            choices: Vec<Choice>,
        }
        #[derive(Deserialize)]
        struct Choice {
            message: Message,
        }
        #[derive(Deserialize)]
        struct Message {
            content: Option<String>,
        }
        match serde_json::from_str::<Reply>(&text) {
            Ok(r) => Attempt::Done(r.choices.into_iter().next().and_then(|c| c.message.content).unwrap_or_default()),
            Err(e) => Attempt::Fail(server(format!(
                "expected a chat-completions JSON reply with choices[0].message.content: {e}"
            ))),
        }
    }
}

fn is_timeout(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Timeout(_) => true,
        ureq::Error::Io(io) => matches!(io.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock),
        _ => false,
    }
}

/// A finished queued request: its ticket and result.
pub type GrmAnswer = (u64, Result<GrmScore, RewardModelError>);

/// A bounded request queue served by one worker thread. `try_submit` never blocks: when the
/// queue is full it returns [`RewardModelError::QueueFull`] and the caller keeps its last
/// potential; answers are collected with `try_recv` in submission order.
#[derive(Debug)]
pub struct GrmQueue {
    tx: SyncSender<(u64, GrmRequest)>,
    rx: Receiver<GrmAnswer>,
    capacity: usize,
    next: u64,
    client: Arc<GrmClient>,
}

impl GrmQueue {
    /// Start the worker. The worker ends when the queue is dropped (after its current request).
    pub fn new(client: Arc<GrmClient>) -> Self {
        let capacity = client.config().queue_capacity;
        let (tx, jobs) = sync_channel::<(u64, GrmRequest)>(capacity);
        let (done, rx) = std::sync::mpsc::channel();
        let worker = Arc::clone(&client);
        std::thread::spawn(move || {
            while let Ok((id, req)) = jobs.recv() {
                if done.send((id, worker.score(&req))).is_err() {
                    break;
                }
            }
        });
        Self { tx, rx, capacity, next: 0, client }
    }

    /// The client behind the queue (for its parse-failure count).
    pub fn client(&self) -> &GrmClient {
        &self.client
    }

    /// Queue `req`; returns its ticket, or `QueueFull` at once when `capacity` requests wait.
    pub fn try_submit(&mut self, req: GrmRequest) -> Result<u64, RewardModelError> {
        let id = self.next;
        match self.tx.try_send((id, req)) {
            Ok(()) => {
                self.next += 1;
                Ok(id)
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                Err(RewardModelError::QueueFull { capacity: self.capacity })
            }
        }
    }

    /// A finished answer, if one is ready.
    pub fn try_recv(&self) -> Option<GrmAnswer> {
        match self.rx.try_recv() {
            Ok(a) => Some(a),
            Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => None,
        }
    }

    /// Wait up to `timeout` for the next answer.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<GrmAnswer> {
        match self.rx.recv_timeout(timeout) {
            Ok(a) => Some(a),
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_cases() {
        assert!((parse_score("<score>+33.3%</score>").unwrap() - 0.333).abs() < 1e-12);
        assert_eq!(parse_score("<score>-150%</score>"), Some(-1.0));
        assert_eq!(parse_score("the robot moved"), None);
        assert_eq!(parse_score("<score>+10%</score> on second thought <score>-20%</score>"), Some(-0.2));
        assert_eq!(parse_score("<score>0%</score>"), Some(0.0));
        assert_eq!(parse_score("<score> +7 % </score>"), Some(0.07));
        assert_eq!(parse_score("<score>lots</score>"), None);
        assert_eq!(parse_score("<score>+20%"), None);
        assert_eq!(parse_score("<score>NaN%</score>"), None);
    }

    #[test]
    fn body_has_eight_images_in_order() {
        let client = GrmClient::new(GrmConfig::default()).unwrap();
        let img = |b: u8| Image::png(vec![b]);
        let v = |b: u8| Views { front: img(b), left_wrist: img(b + 1), right_wrist: img(b + 2) };
        let body = client.body(&GrmRequest::new("push the block", img(0), img(1), v(2), v(5)));
        let parts = body["messages"][0]["content"].as_array().unwrap();
        let urls: Vec<&str> = parts.iter().filter_map(|p| p["image_url"]["url"].as_str()).collect();
        let want: Vec<String> = (0u8..8)
            .map(|b| format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode([b])))
            .collect();
        assert_eq!(urls, want);
        let text: String = parts.iter().filter_map(|p| p["text"].as_str()).collect();
        assert_eq!(text.matches("push the block").count(), 2);
        // Backward mode: the goal fills every BEFORE slot.
        let body = client.body(&GrmRequest::backward("t", img(0), img(9), v(5)));
        let urls: Vec<String> = body["messages"][0]["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["image_url"]["url"].as_str().map(String::from))
            .collect();
        assert!(urls[1..5].iter().all(|u| u == &urls[1]));
    }

    #[test]
    fn prompt_needs_eight_slots() {
        let e = GrmClient::new(GrmConfig { prompt: Some("only <image>".into()), ..Default::default() }).unwrap_err();
        assert!(e.to_string().contains("grm.prompt") && e.to_string().contains("found 1"), "{e}");
    }
}
