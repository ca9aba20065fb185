//! Downloads against a local HTTP server on 127.0.0.1 that each test starts: a full transfer,
//! an interrupted one resumed with a Range request, a wrong checksum, a 404, and a server that
//! stalls. The server is hand-written on `std::net` so it can misbehave on purpose; every loop
//! in it is bounded (connection count and a deadline).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use o2o_datasets::download::{download, hash_file, DownloadRequest};
use o2o_datasets::DatasetError;

#[derive(Clone, Copy)]
enum Mode {
    /// Serve the body, honouring `Range`.
    Normal,
    /// First connection: announce the full length, send half, close. Later ones: Normal.
    DropFirst,
    /// 404 for everything.
    NotFound,
    /// Send headers and 100 bytes, then go silent for 3 s.
    Stall,
}

struct Server {
    url: String,
    /// The `Range` header of each request ("" when none).
    ranges: Arc<Mutex<Vec<String>>>,
}

fn body() -> Vec<u8> {
    (0..200_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

fn serve(mode: Mode, max_connections: usize) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/data/file.hdf5", listener.local_addr().unwrap());
    let ranges = Arc::new(Mutex::new(Vec::new()));
    let log = ranges.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut served = 0;
        while served < max_connections && Instant::now() < deadline {
            match listener.accept() {
                Ok((stream, _)) => {
                    handle(stream, mode, served, &log);
                    served += 1;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    Server { url, ranges }
}

fn read_request(stream: &mut TcpStream) -> String {
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut req = Vec::new();
    let mut byte = [0u8; 1];
    while !req.ends_with(b"\r\n\r\n") && req.len() < 8192 {
        match stream.read(&mut byte) {
            Ok(1) => req.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&req).into_owned()
}

fn handle(mut stream: TcpStream, mode: Mode, index: usize, log: &Mutex<Vec<String>>) {
    let req = read_request(&mut stream);
    let range = req
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("range: bytes=").map(|r| r.trim_end_matches('-').to_string()))
        .unwrap_or_default();
    log.lock().unwrap().push(range.clone());
    let data = body();
    let _ = match mode {
        Mode::NotFound => {
            stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found")
        }
        Mode::Stall => {
            let _ = stream.write_all(
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", data.len()).as_bytes(),
            );
            let _ = stream.write_all(&data[..100]);
            let _ = stream.flush();
            std::thread::sleep(Duration::from_secs(3));
            Ok(())
        }
        Mode::DropFirst if index == 0 => {
            let _ = stream.write_all(
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", data.len()).as_bytes(),
            );
            stream.write_all(&data[..data.len() / 2])
        }
        _ => {
            let start: usize = range.parse().unwrap_or(0);
            let head = if start > 0 {
                format!("HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nContent-Range: bytes {}-{}/{}\r\nConnection: close\r\n\r\n", data.len() - start, start, data.len() - 1, data.len())
            } else {
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", data.len())
            };
            stream.write_all(head.as_bytes()).and_then(|_| stream.write_all(&data[start..]))
        }
    };
    let _ = stream.flush();
}

fn sha_of_body() -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("b");
    std::fs::write(&p, body()).unwrap();
    hash_file(&p).unwrap().0
}

fn request(url: &str, dir: &std::path::Path) -> DownloadRequest {
    let mut r = DownloadRequest::new(url, dir, "file.hdf5");
    r.timeout = Duration::from_secs(1);
    r.sha256 = Some(sha_of_body());
    r.bytes = Some(body().len() as u64);
    r
}

#[test]
fn full_download_verifies_and_renames() {
    let server = serve(Mode::Normal, 1);
    let dir = tempfile::tempdir().unwrap();
    let req = request(&server.url, dir.path());
    let mut calls = 0;
    let mut last = (0, None);
    let got = download(&req, &mut |d, t| {
        calls += 1;
        last = (d, t);
    })
    .unwrap();
    assert_eq!(std::fs::read(&got.path).unwrap(), body());
    assert_eq!((got.bytes, got.resumed_from, got.cached), (200_000, 0, false));
    assert_eq!(last, (200_000, Some(200_000)));
    assert!(calls >= 2);
    assert!(!req.partial_path().exists());
    // Second call: served from the cache, no connection made.
    let again = download(&req, &mut |_, _| {}).unwrap();
    assert!(again.cached);
    assert_eq!(server.ranges.lock().unwrap().len(), 1);
}

#[test]
fn interrupted_download_resumes_with_a_range_request() {
    let server = serve(Mode::DropFirst, 2);
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(&server.url, dir.path());
    req.retries = 0;
    let err = download(&req, &mut |_, _| {}).unwrap_err();
    assert!(matches!(err, DatasetError::Network { .. }), "{err}");
    assert_eq!(std::fs::metadata(req.partial_path()).unwrap().len(), 100_000, "partial file kept");
    let got = download(&req, &mut |_, _| {}).unwrap();
    assert_eq!(got.resumed_from, 100_000);
    assert_eq!(std::fs::read(&got.path).unwrap(), body());
    assert_eq!(*server.ranges.lock().unwrap(), vec!["".to_string(), "100000".to_string()]);
}

#[test]
fn automatic_retry_resumes_within_one_call() {
    let server = serve(Mode::DropFirst, 2);
    let dir = tempfile::tempdir().unwrap();
    let got = download(&request(&server.url, dir.path()), &mut |_, _| {}).unwrap();
    assert_eq!(std::fs::read(&got.path).unwrap(), body());
    assert_eq!(server.ranges.lock().unwrap()[1], "100000");
}

#[test]
fn wrong_checksum_deletes_the_partial_file_and_says_so() {
    let server = serve(Mode::Normal, 1);
    let dir = tempfile::tempdir().unwrap();
    let mut req = request(&server.url, dir.path());
    req.sha256 = Some("0".repeat(64));
    let err = download(&req, &mut |_, _| {}).unwrap_err();
    assert!(matches!(err, DatasetError::ChecksumMismatch { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains(&"0".repeat(64)) && msg.contains(&sha_of_body()) && msg.contains("deleted"), "{msg}");
    assert!(!req.partial_path().exists() && !req.path().exists());
}

#[test]
fn not_found_is_an_http_status_error() {
    let server = serve(Mode::NotFound, 1);
    let dir = tempfile::tempdir().unwrap();
    let err = download(&request(&server.url, dir.path()), &mut |_, _| {}).unwrap_err();
    match &err {
        DatasetError::HttpStatus { status, url } => assert_eq!((*status, url.as_str()), (404, server.url.as_str())),
        other => panic!("{other}"),
    }
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "no file left behind");
}

#[test]
fn stalled_server_times_out_with_a_clear_message() {
    let server = serve(Mode::Stall, 1);
    let dir = tempfile::tempdir().unwrap();
    let req = request(&server.url, dir.path());
    let start = Instant::now();
    let err = download(&req, &mut |_, _| {}).unwrap_err();
    assert!(matches!(err, DatasetError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("timeout") && err.to_string().contains(&server.url), "{err}");
    assert!(start.elapsed() < Duration::from_secs(15), "the timeout must fire, not the server closing");
    assert!(!req.path().exists());
}
