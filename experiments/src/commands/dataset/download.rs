//! `o2o dataset download <id|url> [--cache-dir DIR]`: fetch a dataset into the cache with a
//! progress bar, resuming an interrupted download and verifying its SHA-256.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use o2o_datasets::download::{default_cache_dir, download, DownloadRequest};
use o2o_datasets::registry;

/// Arguments of `o2o dataset download`.
#[derive(Args, Debug)]
pub struct DownloadArgs {
    /// A registry id (`hopper-medium-v2`) or an http(s) URL. Omit with `--list`.
    pub dataset: Option<String>,
    /// Cache folder (default `$O2O_DATASETS`, else `$HOME/.cache/o2o/datasets`).
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// Seconds without data before giving up (the partial file is kept for resuming).
    #[arg(long, default_value_t = 30)]
    pub timeout: u64,
    /// List the registry (id, size, checksum known, env, URL) and exit.
    #[arg(long)]
    pub list: bool,
}

/// `o2o dataset download`.
pub fn run(args: DownloadArgs) -> Result<()> {
    if args.list {
        println!("{:<28} {:>12} {:>7} {:<26} url", "id", "bytes", "sha256", "env");
        for e in registry::entries() {
            let bytes = e.bytes.map(|b| b.to_string()).unwrap_or_else(|| "?".into());
            println!(
                "{:<28} {:>12} {:>7} {:<26} {}",
                e.id,
                bytes,
                if e.sha256.is_some() { "yes" } else { "no" },
                e.env_id,
                e.url
            );
        }
        return Ok(());
    }
    let target = args.dataset.context("give a dataset id or URL (or --list)")?;
    let cache = args.cache_dir.unwrap_or_else(default_cache_dir);
    let mut req = if target.starts_with("http://") || target.starts_with("https://") {
        let name = target.rsplit('/').next().filter(|n| !n.is_empty()).context("the URL has no file name")?;
        DownloadRequest::new(&target, &cache, name)
    } else {
        let e = registry::lookup(&target)?;
        let mut r = DownloadRequest::new(&e.url, &cache, e.file_name());
        r.sha256 = e.sha256.map(str::to_string);
        r.bytes = e.bytes;
        r
    };
    req.timeout = Duration::from_secs(args.timeout.max(1));
    let bar = ProgressBar::new(req.bytes.unwrap_or(0));
    bar.set_style(
        ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} [{bar:40}] {bytes_per_sec} eta {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let got = download(&req, &mut |done, total| {
        if let Some(t) = total {
            bar.set_length(t);
        }
        bar.set_position(done);
    });
    bar.finish_and_clear();
    let got = got.with_context(|| format!("downloading {}", req.url))?;
    if got.cached {
        println!("already cached: {}", got.path.display());
    } else if got.resumed_from > 0 {
        println!("resumed at byte {} and finished: {}", got.resumed_from, got.path.display());
    } else {
        println!("downloaded: {}", got.path.display());
    }
    let verified = if req.sha256.is_some() { "verified" } else { "not verified: no checksum known for this file" };
    println!("{} bytes, sha256 {} ({verified})", got.bytes, got.sha256);
    Ok(())
}
