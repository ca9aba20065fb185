//! Regression test: a child process started while an HDF5 file is open must not inherit the
//! file (and HDF5's lock on it). Before the fix, re-opening the file while such a child lived
//! failed with "unable to lock file, errno = 11" — seen as a flaky CLI test.

use o2o_datasets::h5util;
use std::process::Command;

#[test]
fn a_child_started_while_a_file_is_open_does_not_keep_it_locked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locked.hdf5");
    let file = h5util::create(&path).unwrap();
    file.new_dataset::<f32>().shape([3]).create("rewards").unwrap().write_raw(&[1.0f32, 2.0, 3.0]).unwrap();
    // A long-lived child, started while the file is open for writing.
    let mut child = Command::new("sleep").arg("5").spawn().expect("spawn sleep");
    drop(file);
    let reopened = h5util::open(&path);
    child.kill().ok();
    child.wait().ok();
    let reopened = reopened.expect("the file must open again while the child lives");
    let back: Vec<f32> = reopened.dataset("rewards").unwrap().read_raw().unwrap();
    assert_eq!(back, vec![1.0, 2.0, 3.0]);
}
