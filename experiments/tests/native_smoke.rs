//! Smoke tests of the installed pieces the binary links: Rerun saves a recording that the
//! venv's viewer tools can read, and `o2o doctor` reports every native dependency.

use std::process::Command;

fn venv_bin(name: &str) -> std::path::PathBuf {
    let venv =
        std::env::var("O2O_VENV").expect("O2O_VENV is set by the generated .cargo/config.toml; run `make setup`");
    std::path::Path::new(&venv).join("bin").join(name)
}

#[test]
fn rerun_saves_a_recording_the_viewer_tools_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("smoke.rrd");
    {
        let rec = rerun::RecordingStreamBuilder::new("o2o_smoke").save(&path).unwrap();
        for step in 0..10i64 {
            rec.set_time_sequence("env_step", step);
            rec.log("train/return", &rerun::Scalars::single(step as f64 * 2.0)).unwrap();
        }
        rec.flush_blocking().unwrap();
    }
    assert!(std::fs::metadata(&path).unwrap().len() > 0);
    let out =
        Command::new(venv_bin("rerun")).args(["rrd", "print", "-vv"]).arg(&path).output().expect("venv rerun command");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "rerun rrd print failed: {text}");
    assert!(text.contains("train/return"), "entity path missing from recording: {text}");
    assert!(text.contains("env_step"), "timeline missing from recording: {text}");
}

#[test]
fn doctor_reports_every_dependency() {
    let out = Command::new(env!("CARGO_BIN_EXE_o2o")).arg("doctor").env_remove("LD_LIBRARY_PATH").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "doctor failed:\n{text}\n{}", String::from_utf8_lossy(&out.stderr));
    for (name, want) in [("libtorch", "2.13.0"), ("mujoco", "3.17.0"), ("hdf5", "1.10"), ("rerun sdk", "0.36.3")] {
        let line = text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("no `{name}` line in:\n{text}"));
        assert!(line.contains(want), "`{name}` line does not show {want}: {line}");
    }
    assert!(text.lines().any(|l| l.starts_with("gymnasium assets") && l.contains("assets")), "{text}");
}

/// The binary keeps libtorch's CUDA backend whenever the libtorch it is built against has one
/// (issue 49 item 1; the linker's `--as-needed` used to drop it, so `--device cuda` could never
/// work): the ELF's NEEDED entries list `libtorch_cuda.so`, and `o2o doctor` finds it loaded.
/// The libtorch `make setup` installs is PyPI's CUDA build, so on CI this always checks.
#[test]
fn the_binary_links_the_cuda_backend_when_libtorch_has_one() {
    let libtorch = std::env::var("LIBTORCH").expect("LIBTORCH is set by the generated .cargo/config.toml");
    let cuda = std::path::Path::new(&libtorch).join("lib/libtorch_cuda.so");
    let out = Command::new("readelf").args(["-d", env!("CARGO_BIN_EXE_o2o")]).output().expect("readelf (binutils)");
    let needed = String::from_utf8_lossy(&out.stdout);
    let doctor = Command::new(env!("CARGO_BIN_EXE_o2o")).arg("doctor").output().unwrap();
    let text = String::from_utf8_lossy(&doctor.stdout);
    let line =
        text.lines().find(|l| l.starts_with("cuda backend")).unwrap_or_else(|| panic!("no cuda backend line:\n{text}"));
    if option_env!("O2O_CUDA_LINK_OPTED_OUT").is_some() {
        // Built with O2O_LINK_CUDA=0: doctor says so and does not fail.
        assert!(line.contains("O2O_LINK_CUDA=0") && doctor.status.success(), "{line}");
    } else if cuda.is_file() {
        assert!(
            needed.contains("[libtorch_cuda.so]"),
            "{} has libtorch_cuda.so but the binary does not NEED it:\n{needed}",
            libtorch
        );
        assert!(line.contains("loaded") && line.contains("libtorch_cuda.so"), "{line}");
    } else {
        assert!(line.contains("CPU-only"), "{line}");
    }
}

#[test]
fn doctor_fails_with_a_fix_when_assets_are_missing() {
    let out = Command::new(env!("CARGO_BIN_EXE_o2o"))
        .arg("doctor")
        .env("O2O_GYM_ASSETS", "/nonexistent/o2o-assets")
        .output()
        .unwrap();
    assert!(!out.status.success(), "doctor must fail without assets");
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(all.contains("MISSING") && all.contains("make setup"), "no fix named in:\n{all}");
}

#[test]
fn version_flag_prints_the_version() {
    let out = Command::new(env!("CARGO_BIN_EXE_o2o")).arg("--version").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains(env!("CARGO_PKG_VERSION")));
}
