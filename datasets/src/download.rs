//! Verified, resumable downloads into the dataset cache.
//!
//! A download streams into `<cache>/<name>.part`. If that file exists from an interrupted run,
//! the request asks only for the missing bytes (`Range: bytes=<have>-`); a server that ignores
//! the range (status 200) restarts the file. When the body is complete the whole file is
//! hashed; a SHA-256 that differs from the registry's deletes the partial file and says so, a
//! matching one (or none known) renames `.part` to the final name, so the cache never holds a
//! half-written or unverified file under a dataset's name. A server that sends nothing for
//! `timeout` fails with [`DatasetError::Timeout`] and keeps the partial file for the next run.
//!
//! Progress is reported through a callback so this library has no terminal-UI dependency; the
//! `o2o` binary draws it with indicatif.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::error::{DatasetError, Result};

/// The default cache folder: `$O2O_DATASETS`, else `$HOME/.cache/o2o/datasets`.
pub fn default_cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("O2O_DATASETS") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
    home.join(".cache/o2o/datasets")
}

/// D4RL's own cache folder, where D4RL (and a user's earlier D4RL runs) put the files:
/// `$D4RL_DATASET_DIR`, else `$HOME/.d4rl/datasets` (`d4rl/offline_env.py`).
pub fn d4rl_cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("D4RL_DATASET_DIR") {
        return Some(PathBuf::from(d));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".d4rl/datasets"))
}

/// The cached copy of a registry file: in `cache_dir` (default [`default_cache_dir`]) first,
/// else in D4RL's own cache ([`d4rl_cache_dir`]) when the file is there. Returns the o2o cache
/// path (the one a download would write) when neither has it.
pub fn cached_file(cache_dir: Option<&Path>, file_name: &str) -> (PathBuf, bool) {
    let ours = cache_dir.map(Path::to_path_buf).unwrap_or_else(default_cache_dir).join(file_name);
    if ours.is_file() {
        return (ours, true);
    }
    match d4rl_cache_dir().map(|d| d.join(file_name)) {
        Some(theirs) if theirs.is_file() => (theirs, true),
        _ => (ours, false),
    }
}

/// What to download and how to check it.
#[derive(Debug, Clone)]
pub struct DownloadRequest {
    /// http:// or https:// URL.
    pub url: String,
    /// Folder the file goes into (created if missing).
    pub cache_dir: PathBuf,
    /// File name inside the cache folder.
    pub file_name: String,
    /// Expected SHA-256 (hex), when known.
    pub sha256: Option<String>,
    /// Expected size in bytes, when known.
    pub bytes: Option<u64>,
    /// Longest wait for the connection or for the next bytes of the body.
    pub timeout: Duration,
    /// How many times an interrupted transfer is resumed automatically within this call.
    pub retries: u32,
}

impl DownloadRequest {
    /// A request with a 30 s stall timeout and 3 automatic resumes.
    pub fn new(url: &str, cache_dir: &Path, file_name: &str) -> Self {
        Self {
            url: url.to_string(),
            cache_dir: cache_dir.to_path_buf(),
            file_name: file_name.to_string(),
            sha256: None,
            bytes: None,
            timeout: Duration::from_secs(30),
            retries: 3,
        }
    }

    /// The final path of the file.
    pub fn path(&self) -> PathBuf {
        self.cache_dir.join(&self.file_name)
    }

    /// The partial file a transfer writes into.
    pub fn partial_path(&self) -> PathBuf {
        self.cache_dir.join(format!("{}.part", self.file_name))
    }
}

/// What a finished download produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downloaded {
    /// The verified file.
    pub path: PathBuf,
    /// Its SHA-256 (hex).
    pub sha256: String,
    /// Its size.
    pub bytes: u64,
    /// Bytes that were already on disk (from an earlier, interrupted run) when this one started.
    pub resumed_from: u64,
    /// Whether the file was already in the cache (nothing was transferred).
    pub cached: bool,
}

/// Downloads `req.url` into the cache (see the module docs). `progress(done, total)` is called
/// as bytes arrive.
pub fn download(req: &DownloadRequest, progress: &mut dyn FnMut(u64, Option<u64>)) -> Result<Downloaded> {
    let path = req.path();
    let partial = req.partial_path();
    std::fs::create_dir_all(&req.cache_dir).map_err(|e| DatasetError::io(&req.cache_dir, e))?;
    if path.exists() {
        let (sha, bytes) = hash_file(&path)?;
        if req.sha256.as_deref().is_none_or(|want| want.eq_ignore_ascii_case(&sha)) {
            progress(bytes, Some(bytes));
            return Ok(Downloaded { path, sha256: sha, bytes, resumed_from: bytes, cached: true });
        }
        // A cached file that fails its checksum is replaced.
        std::fs::remove_file(&path).map_err(|e| DatasetError::io(&path, e))?;
    }
    let resumed_from = file_len(&partial);
    let mut attempt = 0;
    loop {
        match transfer(req, &partial, progress) {
            Ok(()) => break,
            Err(DatasetError::Network { .. }) if attempt < req.retries => attempt += 1,
            Err(e) => return Err(e),
        }
    }
    let (sha, bytes) = hash_file(&partial)?;
    if let Some(want) = &req.bytes {
        if *want != bytes {
            std::fs::remove_file(&partial).map_err(|e| DatasetError::io(&partial, e))?;
            return Err(DatasetError::SizeMismatch { url: req.url.clone(), expected: *want, found: bytes });
        }
    }
    if let Some(want) = &req.sha256 {
        if !want.eq_ignore_ascii_case(&sha) {
            std::fs::remove_file(&partial).map_err(|e| DatasetError::io(&partial, e))?;
            return Err(DatasetError::ChecksumMismatch {
                url: req.url.clone(),
                expected: want.clone(),
                found: sha,
                partial,
            });
        }
    }
    std::fs::rename(&partial, &path).map_err(|e| DatasetError::io(&path, e))?;
    Ok(Downloaded { path, sha256: sha, bytes, resumed_from, cached: false })
}

/// One HTTP exchange appending to `partial`. Network failures leave `partial` in place.
fn transfer(req: &DownloadRequest, partial: &Path, progress: &mut dyn FnMut(u64, Option<u64>)) -> Result<()> {
    let mut have = file_len(partial);
    if req.bytes.is_some_and(|b| have == b) {
        return Ok(()); // complete already; verified by the caller
    }
    if req.bytes.is_some_and(|b| have > b) {
        have = 0;
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(req.timeout))
        .timeout_recv_response(Some(req.timeout))
        .timeout_per_read(Some(req.timeout))
        .build()
        .into();
    let mut call = agent.get(&req.url);
    if have > 0 {
        call = call.header("Range", format!("bytes={have}-"));
    }
    let resp = call.call().map_err(|e| net_error(req, partial, e))?;
    let status = resp.status().as_u16();
    let content_len =
        resp.headers().get("content-length").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let (append, total) = match status {
        206 => (true, content_len.map(|l| l + have)),
        200 => (false, content_len),
        // Nothing left to send: the partial file already holds the whole body.
        416 if have > 0 => return Ok(()),
        _ => return Err(DatasetError::HttpStatus { url: req.url.clone(), status }),
    };
    let file = if append {
        OpenOptions::new().append(true).open(partial)
    } else {
        have = 0;
        File::create(partial)
    };
    let mut file = file.map_err(|e| DatasetError::io(partial, e))?;
    let mut body = resp.into_body().into_reader();
    let mut buf = vec![0u8; 1 << 16];
    let mut done = have;
    progress(done, total);
    loop {
        let n = match body.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let _ = file.sync_all();
                return Err(io_net_error(req, partial, e));
            }
        };
        file.write_all(&buf[..n]).map_err(|e| DatasetError::io(partial, e))?;
        done += n as u64;
        progress(done, total);
    }
    file.sync_all().map_err(|e| DatasetError::io(partial, e))?;
    if let Some(t) = total {
        if done < t {
            return Err(DatasetError::Network {
                url: req.url.clone(),
                message: format!("connection closed after {done} of {t} bytes; partial file kept"),
            });
        }
    }
    Ok(())
}

fn is_timeout(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Timeout(_) => true,
        ureq::Error::Io(io) => matches!(io.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock),
        _ => false,
    }
}

fn net_error(req: &DownloadRequest, partial: &Path, e: ureq::Error) -> DatasetError {
    if is_timeout(&e) {
        return DatasetError::Timeout {
            url: req.url.clone(),
            secs: req.timeout.as_secs().max(1),
            partial: partial.into(),
        };
    }
    DatasetError::Network { url: req.url.clone(), message: e.to_string() }
}

fn io_net_error(req: &DownloadRequest, partial: &Path, e: std::io::Error) -> DatasetError {
    let timeout = matches!(e.kind(), std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock)
        || e.get_ref().and_then(|inner| inner.downcast_ref::<ureq::Error>()).is_some_and(is_timeout);
    if timeout {
        return DatasetError::Timeout {
            url: req.url.clone(),
            secs: req.timeout.as_secs().max(1),
            partial: partial.into(),
        };
    }
    DatasetError::Network {
        url: req.url.clone(),
        message: format!("transfer interrupted ({e}); partial file kept for resuming"),
    }
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// SHA-256 (hex) and size of a file.
pub fn hash_file(path: &Path) -> Result<(String, u64)> {
    let mut f = File::open(path).map_err(|e| DatasetError::io(path, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf).map_err(|e| DatasetError::io(path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        total += n as u64;
    }
    let hex = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((hex, total))
}
