//! Smoke test of the native HDF5 install: write a dataset to a temp dir and read it back.

#[test]
fn hdf5_writes_and_reads_a_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("smoke.hdf5");
    let values: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
    {
        let file = hdf5_metno::File::create(&path).unwrap();
        file.new_dataset::<f32>().shape([4, 3]).create("observations").unwrap().write_raw(&values).unwrap();
    }
    let file = hdf5_metno::File::open(&path).unwrap();
    let ds = file.dataset("observations").unwrap();
    assert_eq!(ds.shape(), vec![4, 3]);
    let back: Vec<f32> = ds.read_raw().unwrap();
    assert_eq!(back, values);
    let version = o2o_datasets::hdf5_version();
    assert!(version.starts_with("1."), "unexpected HDF5 version {version}");
}
