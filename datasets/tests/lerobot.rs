//! LeRobotDataset reader and writer without Python: o2o's v3.0 writer read back (one and many
//! data files, several chunk folders), a v2.1 layout made from it, and the errors a bad folder
//! gives. The interop tests against the real `lerobot` package are in
//! `experiments/tests/lerobot_interop.rs`.

use std::fs::File;
use std::path::Path;

use o2o_datasets::d4rl::D4rlDataset;
use o2o_datasets::h5util::{Column, Dtype};
use o2o_datasets::lerobot::{write_v30, LeRobotDataset, LeRobotKeys, WriteOptions};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use serde_json::{json, Value};

/// Three episodes: 4 rows terminated, 3 rows timed out, 2 rows unflagged (the data ran out);
/// the second has two intervened rows.
fn sample() -> D4rlDataset {
    let mut d = D4rlDataset::empty("sample".into(), 3, 2);
    let n = 9;
    for i in 0..n {
        let x = i as f32;
        d.observations.extend([x, -x, 0.5 * x]);
        d.actions.extend([0.1 * x, -0.2 * x]);
        d.rewards.push(1.0 + x);
    }
    d.terminals = vec![0., 0., 0., 1., 0., 0., 0., 0., 0.];
    d.timeouts = Some(vec![0., 0., 0., 0., 0., 0., 1., 0., 0.]);
    d.next_observations = None;
    d.infos.insert(
        "infos/intervention".into(),
        Column { shape: vec![n], dtype: Dtype::Float32, data: vec![0., 0., 0., 0., 1., 1., 0., 0., 0.] },
    );
    d
}

fn read(root: &Path) -> LeRobotDataset {
    LeRobotDataset::read(root, &LeRobotKeys::default()).unwrap()
}

fn json_file(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn edit_info(root: &Path, f: impl FnOnce(&mut Value)) {
    let p = root.join("meta/info.json");
    let mut v = json_file(&p);
    f(&mut v);
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

fn assert_same_rows(a: &D4rlDataset, b: &D4rlDataset) {
    assert_eq!((a.obs_dim, a.act_dim), (b.obs_dim, b.act_dim));
    assert_eq!(a.observations, b.observations);
    assert_eq!(a.actions, b.actions);
    assert_eq!(a.rewards, b.rewards);
    assert_eq!(a.terminals, b.terminals);
}

#[test]
fn written_v30_reads_back_with_episode_ends_and_interventions() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ds");
    let d = sample();
    let s = write_v30(&d, &root, &WriteOptions { fps: 10, task: "reach".into(), ..Default::default() }).unwrap();
    assert_eq!((s.episodes, s.frames, s.data_files.len()), (3, 9, 1));
    for f in [
        "meta/info.json",
        "meta/stats.json",
        "meta/tasks.parquet",
        "meta/episodes/chunk-000/file-000.parquet",
        "data/chunk-000/file-000.parquet",
    ] {
        assert!(root.join(f).is_file(), "{f}");
    }
    assert!(!root.with_file_name(format!("ds.tmp-{}", std::process::id())).exists(), "the temp folder is renamed away");

    let r = read(&root);
    assert_eq!(r.info.codebase_version, "v3.0");
    assert_eq!(r.tasks, vec!["reach".to_string()]);
    assert_eq!(r.episodes.iter().map(|e| e.length).collect::<Vec<_>>(), vec![4, 3, 2]);
    assert_eq!(r.episodes[1].tasks, vec!["reach".to_string()]);
    assert_same_rows(&r.d4rl, &d);
    // Terminated episode: next.done on its last row; the two others end without it: timeouts.
    assert_eq!(r.d4rl.timeouts.as_deref().unwrap(), &[0., 0., 0., 0., 0., 0., 1., 0., 1.]);
    assert!(r.d4rl.next_observations.is_none(), "LeRobot stores no s'");
    assert_eq!(r.d4rl.infos["infos/intervention"].data, d.infos["infos/intervention"].data);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.intervention_key.as_deref(), Some("complementary_info.is_intervention"));

    // Transitions: s' is the next frame of the episode; a timed-out last frame has none.
    let t = r.d4rl.corrected_transitions(&Default::default()).unwrap();
    assert_eq!(t.len(), 7, "rows 6 and 8 end episodes by time limit without a stored s'");
    assert_eq!(&t.next_observations[..3], &[1.0, -1.0, 0.5]);

    // stats.json and info.json as LeRobot writes them.
    let stats = json_file(&root.join("meta/stats.json"));
    assert_eq!(stats["next.reward"]["max"], json!([9.0]));
    assert_eq!(stats["observation.state"]["count"], json!([9]));
    assert_eq!(stats["index"]["mean"], json!([4.0]));
    let info = json_file(&root.join("meta/info.json"));
    assert_eq!(info["features"]["observation.state"]["shape"], json!([3]));
    assert_eq!(info["features"]["next.done"]["dtype"], json!("bool"));
    assert_eq!((info["fps"].clone(), info["total_frames"].clone()), (json!(10), json!(9)));

    // A LeRobot folder converts to a D4RL file and back to the same rows.
    let h5 = tmp.path().join("back.hdf5");
    r.d4rl.write(&h5).unwrap();
    assert_same_rows(&D4rlDataset::read(&h5).unwrap(), &d);

    // Writing over an existing folder is refused.
    let msg = write_v30(&d, &root, &WriteOptions::default()).unwrap_err().to_string();
    assert!(msg.contains("already exists"), "{msg}");
}

#[test]
fn many_data_files_in_several_chunks_read_through_the_template() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ds");
    let d = sample();
    // A tiny size budget gives one episode per file; two files per chunk folder.
    let opts = WriteOptions { data_files_size_in_mb: 1e-6, chunks_size: 2, ..Default::default() };
    let s = write_v30(&d, &root, &opts).unwrap();
    let names: Vec<String> = s.data_files.iter().map(|p| p.display().to_string()).collect();
    assert_eq!(
        names,
        ["data/chunk-000/file-000.parquet", "data/chunk-000/file-001.parquet", "data/chunk-001/file-000.parquet"]
    );
    let r = read(&root);
    assert_eq!(r.data_files, s.data_files);
    assert_same_rows(&r.d4rl, &d);

    // A custom template: move the files and say so in info.json.
    for (k, f) in s.data_files.iter().enumerate() {
        let to = root.join(format!("frames/part-{k:02}.parquet"));
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::rename(root.join(f), to).unwrap();
    }
    // chunk c, file f → part 2c + f (chunks_size 2), written as two fields in the template.
    edit_info(&root, |v| v["data_path"] = json!("frames/part-{chunk_index:01d}{file_index:01d}.parquet"));
    for (k, (c, f)) in [(0, 0), (0, 1), (1, 0)].iter().enumerate() {
        std::fs::rename(
            root.join(format!("frames/part-{k:02}.parquet")),
            root.join(format!("frames/part-{c}{f}.parquet")),
        )
        .unwrap();
    }
    assert_same_rows(&read(&root).d4rl, &d);
}

/// Rewrites an o2o v3.0 folder in the v2.1 layout: one Parquet file per episode, named by
/// `episode_chunk` and `episode_index`; `meta/episodes.jsonl` and `meta/tasks.jsonl`.
fn to_v21(root: &Path, episode_lengths: &[usize]) {
    let src = root.join("data/chunk-000/file-000.parquet");
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&src).unwrap()).unwrap().build().unwrap();
    let batches: Vec<_> = reader.map(|b| b.unwrap()).collect();
    let all = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap();
    let mut start = 0;
    let mut lines = String::new();
    for (e, len) in episode_lengths.iter().enumerate() {
        let path = root.join(format!("data/chunk-000/episode_{e:06}.parquet"));
        let mut w = ArrowWriter::try_new(File::create(&path).unwrap(), all.schema(), None).unwrap();
        w.write(&all.slice(start, *len)).unwrap();
        w.close().unwrap();
        start += len;
        lines.push_str(&format!("{{\"episode_index\": {e}, \"tasks\": [\"reach\"], \"length\": {len}}}\n"));
    }
    std::fs::remove_file(src).unwrap();
    std::fs::remove_dir_all(root.join("meta/episodes")).unwrap();
    std::fs::remove_file(root.join("meta/tasks.parquet")).unwrap();
    std::fs::write(root.join("meta/episodes.jsonl"), lines).unwrap();
    std::fs::write(root.join("meta/tasks.jsonl"), "{\"task_index\": 0, \"task\": \"reach\"}\n").unwrap();
    edit_info(root, |v| {
        v["codebase_version"] = json!("v2.1");
        v["data_path"] = json!("data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet");
    });
}

#[test]
fn v21_layout_reads_like_v30() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ds");
    let d = sample();
    write_v30(&d, &root, &WriteOptions::default()).unwrap();
    let v30 = read(&root);
    to_v21(&root, &[4, 3, 2]);
    let v21 = read(&root);
    assert_eq!(v21.info.codebase_version, "v2.1");
    assert_eq!(v21.data_files.len(), 3);
    assert_eq!(v21.tasks, vec!["reach".to_string()]);
    assert_same_rows(&v21.d4rl, &v30.d4rl);
    assert_eq!(v21.d4rl.timeouts, v30.d4rl.timeouts);

    // An episode file the list names but the folder lacks.
    std::fs::remove_file(root.join("data/chunk-000/episode_000001.parquet")).unwrap();
    let msg = LeRobotDataset::read(&root, &LeRobotKeys::default()).unwrap_err().to_string();
    assert!(
        msg.contains("episode_000001.parquet") && msg.contains("3 frames of episode 1") && msg.contains("found none"),
        "{msg}"
    );
}

#[test]
fn keys_can_be_remapped_and_video_features_are_listed_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ds");
    let d = sample();
    write_v30(&d, &root, &WriteOptions::default()).unwrap();
    edit_info(&root, |v| {
        v["features"]["observation.images.top"] =
            json!({"dtype": "video", "shape": [3, 64, 64], "names": ["channels", "height", "width"]});
    });
    let keys = LeRobotKeys {
        // Observation = state then the intervention flag (any numeric features, in order).
        observation: vec!["observation.state".into(), "complementary_info.is_intervention".into()],
        reward: Some("index".into()),
        intervention: Some("next.done".into()),
        ..Default::default()
    };
    let r = LeRobotDataset::read(&root, &keys).unwrap();
    assert_eq!(r.d4rl.obs_dim, 4);
    assert_eq!(&r.d4rl.observations[16..20], &[4.0, -4.0, 2.0, 1.0], "row 4: state then its intervention flag");
    assert_eq!(r.d4rl.rewards, (0..9).map(|i| i as f32).collect::<Vec<_>>());
    assert_eq!(r.d4rl.infos["infos/intervention"].data, d.terminals);
    assert!(r.skipped.iter().any(|s| s.starts_with("observation.images.top (video")), "{:?}", r.skipped);
    assert!(r.skipped.iter().any(|s| s.starts_with("next.reward")), "{:?}", r.skipped);

    // A video feature as the observation is refused with the key and the dtype.
    let video = LeRobotKeys { observation: vec!["observation.images.top".into()], ..Default::default() };
    let msg = LeRobotDataset::read(&root, &video).unwrap_err().to_string();
    assert!(msg.contains("features.observation.images.top.dtype") && msg.contains("video"), "{msg}");
    // A named key that does not exist.
    let absent = LeRobotKeys { reward: Some("next.rewards".into()), ..Default::default() };
    let msg = LeRobotDataset::read(&root, &absent).unwrap_err().to_string();
    assert!(msg.contains("info.json") && msg.contains("features.next.rewards") && msg.contains("next.reward"), "{msg}");
    // A vector where one value per frame is needed.
    let wide = LeRobotKeys { done: Some("action".into()), ..Default::default() };
    let msg = LeRobotDataset::read(&root, &wide).unwrap_err().to_string();
    assert!(msg.contains("features.action.shape") && msg.contains("[2]"), "{msg}");
}

#[test]
fn missing_defaults_warn_and_bad_folders_name_file_and_key() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ds");
    write_v30(&sample(), &root, &WriteOptions::default()).unwrap();

    // No reward or done features (a behaviour-cloning dataset): zeros, time-limit ends, warnings.
    edit_info(&root, |v| {
        let f = v["features"].as_object_mut().unwrap();
        f.remove("next.reward");
        f.remove("next.done");
    });
    let r = read(&root);
    assert!(r.d4rl.rewards.iter().all(|x| *x == 0.0));
    assert!(r.d4rl.terminals.iter().all(|x| *x == 0.0));
    assert_eq!(r.d4rl.episodes(None).len(), 3);
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);

    // info.json declares a width the data file does not have.
    edit_info(&root, |v| v["features"]["action"]["shape"] = json!([5]));
    let msg = LeRobotDataset::read(&root, &LeRobotKeys::default()).unwrap_err().to_string();
    assert!(
        msg.contains("data/chunk-000/file-000.parquet") && msg.contains("`action`") && msg.contains("5 value(s)"),
        "{msg}"
    );

    // A feature the data file lacks.
    edit_info(&root, |v| {
        v["features"]["action"]["shape"] = json!([2]);
        v["features"]["next.reward"] = json!({"dtype": "float32", "shape": [1], "names": null});
    });
    std::fs::rename(root.join("data/chunk-000/file-000.parquet"), tmp.path().join("keep.parquet")).unwrap();
    let msg = LeRobotDataset::read(&root, &LeRobotKeys::default()).unwrap_err().to_string();
    assert!(msg.contains("missing") && msg.contains("data_path") && msg.contains("file-{file_index:03d}"), "{msg}");
    std::fs::rename(tmp.path().join("keep.parquet"), root.join("data/chunk-000/file-000.parquet")).unwrap();
    edit_info(&root, |v| v["features"]["action"]["dtype"] = json!("string"));
    let msg = LeRobotDataset::read(&root, &LeRobotKeys::default()).unwrap_err().to_string();
    assert!(msg.contains("features.action.dtype") && msg.contains("string"), "{msg}");

    // A version we do not read.
    edit_info(&root, |v| v["codebase_version"] = json!("v1.6"));
    let msg = LeRobotDataset::read(&root, &LeRobotKeys::default()).unwrap_err().to_string();
    assert!(msg.contains("meta/info.json") && msg.contains("codebase_version") && msg.contains("v1.6"), "{msg}");

    // No info.json at all.
    std::fs::remove_file(root.join("meta/info.json")).unwrap();
    let msg = LeRobotDataset::read(&root, &LeRobotKeys::default()).unwrap_err().to_string();
    assert!(msg.contains("meta/info.json") && msg.contains("missing"), "{msg}");
}

#[test]
fn episode_metadata_that_disagrees_with_the_data_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ds");
    write_v30(&sample(), &root, &WriteOptions::default()).unwrap();
    to_v21(&root, &[4, 3, 2]);
    std::fs::write(
        root.join("meta/episodes.jsonl"),
        "{\"episode_index\": 0, \"length\": 4}\n{\"episode_index\": 1, \"length\": 5}\n{\"episode_index\": 2, \"length\": 2}\n",
    )
    .unwrap();
    let msg = LeRobotDataset::read(&root, &LeRobotKeys::default()).unwrap_err().to_string();
    assert!(
        msg.contains("episode_000001.parquet") && msg.contains("5 frames of episode 1") && msg.contains("found 3"),
        "{msg}"
    );
}
