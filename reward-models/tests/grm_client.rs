//! The GRM client against a fake OpenAI-compatible server on 127.0.0.1 started by the test:
//! good, flaky, failing, slow and malformed replies; the bounded queue never blocks.

use o2o_reward_models::grm::{GrmClient, GrmConfig, GrmQueue, GrmRequest, Image, Views};
use o2o_reward_models::RewardModelError;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the fake server does on its n-th request (counting from 1).
type Behaviour = dyn Fn(usize) -> (u16, String, Duration) + Send + Sync;

struct FakeServer {
    url: String,
    hits: Arc<AtomicUsize>,
    last_body: Arc<Mutex<String>>,
}

fn serve(behaviour: Box<Behaviour>) -> FakeServer {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/chat/completions", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let last_body = Arc::new(Mutex::new(String::new()));
    let (h, b) = (Arc::clone(&hits), Arc::clone(&last_body));
    let behaviour: Arc<Behaviour> = Arc::from(behaviour);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let (h, b, behaviour) = (Arc::clone(&h), Arc::clone(&b), Arc::clone(&behaviour));
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0u8; len];
                reader.read_exact(&mut body).unwrap();
                *b.lock().unwrap() = String::from_utf8(body).unwrap();
                let n = h.fetch_add(1, Ordering::SeqCst) + 1;
                let (status, reply, delay) = behaviour(n);
                std::thread::sleep(delay);
                let head = format!("HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", reply.len());
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(reply.as_bytes());
            });
        }
    });
    FakeServer { url, hits, last_body }
}

fn chat(content: &str) -> String {
    serde_json::json!({ "id": "x", "object": "chat.completion", "choices": [{ "index": 0, "message": { "role": "assistant", "content": content }, "finish_reason": "stop" }] }).to_string()
}

fn request() -> GrmRequest {
    let img = |b: u8| Image::png(vec![137, 80, 78, 71, b]);
    let v = |b: u8| Views { front: img(b), left_wrist: img(b + 1), right_wrist: img(b + 2) };
    GrmRequest::new("push the cube to the target", img(0), img(1), v(2), v(5))
}

fn client(url: &str, timeout_s: f64, retries: u32) -> GrmClient {
    GrmClient::new(GrmConfig {
        url: url.into(),
        timeout_s,
        retries,
        backoff_s: 0.05,
        queue_capacity: 2,
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn scores_a_good_reply_and_sends_the_documented_request() {
    let server =
        serve(Box::new(|_| (200, chat("Reasoning… <score>+10%</score> final: <score>+25.5%</score>"), Duration::ZERO)));
    let c = client(&server.url, 5.0, 0);
    let s = c.score(&request()).unwrap();
    assert_eq!((s.hop, s.parsed, s.attempts), (0.255, true, 1));
    let body: serde_json::Value = serde_json::from_str(&server.last_body.lock().unwrap()).unwrap();
    assert_eq!(body["model"], "tanhuajie2001/Robo-Dopamine-GRM-3B");
    assert_eq!(body["temperature"], 0.1);
    let parts = body["messages"][0]["content"].as_array().unwrap();
    assert_eq!(parts.iter().filter(|p| p["type"] == "image_url").count(), 8);
    assert!(parts[1]["image_url"]["url"].as_str().unwrap().starts_with("data:image/png;base64,"));
}

#[test]
fn retries_server_errors_with_backoff_then_gives_up() {
    // Two 500s, then a good reply: three attempts with retries = 2.
    let flaky = serve(Box::new(|n| {
        if n <= 2 {
            (500, "oops".into(), Duration::ZERO)
        } else {
            (200, chat("<score>-40%</score>"), Duration::ZERO)
        }
    }));
    let t = Instant::now();
    let s = client(&flaky.url, 5.0, 2).score(&request()).unwrap();
    assert_eq!((s.hop, s.attempts), (-0.4, 3));
    assert_eq!(flaky.hits.load(Ordering::SeqCst), 3);
    assert!(t.elapsed() >= Duration::from_millis(150), "backoff 0.05 + 0.10 s");
    // Always 503: 1 + 2 attempts, then a Server error naming the URL.
    let down = serve(Box::new(|_| (503, "busy".into(), Duration::ZERO)));
    let e = client(&down.url, 5.0, 2).score(&request()).unwrap_err();
    assert!(
        matches!(e, RewardModelError::Server { .. })
            && e.to_string().contains("HTTP 503")
            && e.to_string().contains(&down.url),
        "{e}"
    );
    assert_eq!(down.hits.load(Ordering::SeqCst), 3);
    // A 400 is not retried.
    let bad = serve(Box::new(|_| (400, "{\"error\":\"bad image\"}".into(), Duration::ZERO)));
    assert!(client(&bad.url, 5.0, 2).score(&request()).unwrap_err().to_string().contains("HTTP 400"));
    assert_eq!(bad.hits.load(Ordering::SeqCst), 1);
}

#[test]
fn malformed_replies_count_as_zero_with_a_warning() {
    let server = serve(Box::new(|n| match n {
        1 => (200, chat("It looks a bit better."), Duration::ZERO),
        2 => (200, chat("<score>much</score>"), Duration::ZERO),
        3 => (200, chat("<score>+300%</score>"), Duration::ZERO),
        _ => (200, "<html>not json</html>".into(), Duration::ZERO),
    }));
    let c = client(&server.url, 5.0, 1);
    let a = c.score(&request()).unwrap();
    assert_eq!((a.hop, a.parsed), (0.0, false));
    assert_eq!(c.score(&request()).unwrap().hop, 0.0);
    assert_eq!(c.parse_failures(), 2);
    assert_eq!(c.score(&request()).unwrap().hop, 1.0, "clipped to +100 %");
    let e = c.score(&request()).unwrap_err();
    assert!(e.to_string().contains("choices[0].message.content"), "{e}");
    assert_eq!(server.hits.load(Ordering::SeqCst), 4, "a non-JSON reply is not retried");
}

#[test]
fn slow_server_times_out_and_the_queue_never_blocks() {
    let server = serve(Box::new(|_| (200, chat("<score>+5%</score>"), Duration::from_millis(800))));
    let c = Arc::new(client(&server.url, 0.2, 0));
    let t = Instant::now();
    let e = c.score(&request()).unwrap_err();
    assert!(matches!(e, RewardModelError::Timeout { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_millis(700), "gave up after {:?}", t.elapsed());

    // Capacity 2: the worker takes one, two wait, the next is refused — all without waiting.
    let mut q = GrmQueue::new(Arc::clone(&c));
    let t = Instant::now();
    let mut accepted = 0;
    let mut refused = 0;
    for _ in 0..6 {
        match q.try_submit(request()) {
            Ok(_) => accepted += 1,
            Err(RewardModelError::QueueFull { capacity: 2 }) => refused += 1,
            Err(e) => panic!("{e}"),
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(t.elapsed() < Duration::from_millis(150), "submitting took {:?}", t.elapsed());
    assert!((2..=3).contains(&accepted) && refused == 6 - accepted, "accepted {accepted}, refused {refused}");
    assert!(q.try_recv().is_none(), "nothing is ready yet");
    // Answers arrive in order, each a timeout.
    let (id, res) = q.recv_timeout(Duration::from_secs(3)).unwrap();
    assert_eq!(id, 0);
    assert!(matches!(res, Err(RewardModelError::Timeout { .. })));
}
