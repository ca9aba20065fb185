//! The LeRobotDataset v3.0 writer: a [`D4rlDataset`] (a converted file, a robot recording) as
//! a folder `lerobot.datasets.LeRobotDataset(repo_id, root=…)` loads.
//!
//! Written: `meta/info.json`; `meta/stats.json`; `meta/tasks.parquet` (one task, as pandas
//! writes it: the task strings are the frame's index); `meta/episodes/chunk-000/file-000.parquet`
//! (one row per episode with its data file, frame range, task list and statistics); and
//! `data/chunk-CCC/file-FFF.parquet`, one row group per episode, a new file when the current one
//! would pass `data_files_size_in_mb` (uncompressed), `chunks_size` files per chunk folder.
//!
//! Each frame has `observation.state`, `action`, HIL-SERL's `next.reward`, `next.done` (the
//! row's terminal flag; a time-limit end is an episode end without it) and
//! `complementary_info.is_intervention` (the `infos/intervention` column of a robot
//! recording, else 0), and the implicit `timestamp` (frame_index / fps), `frame_index`,
//! `episode_index`, `index` and `task_index`. D4RL's `next_observations` has no LeRobot
//! column and is not written: a reader takes s' from the next frame, so a timed-out episode's
//! last transition has no s' after a round trip.
//!
//! The folder is built beside `out` under a temporary name and renamed into place when
//! complete; `out` must not exist.

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeListArray, Float32Array, Float64Array, Int64Array, ListArray, RecordBatch,
    StringArray,
};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use serde_json::{json, Map, Value};

use super::info::format_template;
use super::parquet_io::parquet_err;
use super::stats::{feature_stats, FeatureStats};
use super::{DEFAULT_ACTION, DEFAULT_DONE, DEFAULT_INTERVENTION, DEFAULT_OBSERVATION, DEFAULT_REWARD};
use crate::d4rl::D4rlDataset;
use crate::error::{DatasetError, Result};

/// The data file template written to `info.json` (LeRobot's default).
pub const DATA_PATH: &str = "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet";
const EPISODES_FILE: &str = "meta/episodes/chunk-000/file-000.parquet";

/// How to write.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteOptions {
    /// Frames per second (`fps`; timestamps are frame_index / fps).
    pub fps: u32,
    /// The one task every frame gets (task_index 0).
    pub task: String,
    /// `robot_type`.
    pub robot_type: Option<String>,
    /// Split D4RL rows into episodes after this many steps when the file has no `timeouts`.
    pub max_episode_steps: Option<usize>,
    /// Start a new data file when the current one would pass this size (uncompressed MB).
    pub data_files_size_in_mb: f64,
    /// Data files per chunk folder.
    pub chunks_size: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            fps: 30,
            task: "o2o dataset".into(),
            robot_type: None,
            max_episode_steps: None,
            data_files_size_in_mb: 100.0,
            chunks_size: 1000,
        }
    }
}

/// What was written.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteSummary {
    /// Episodes.
    pub episodes: usize,
    /// Frames.
    pub frames: usize,
    /// Data files, relative to the root.
    pub data_files: Vec<PathBuf>,
}

/// One feature column of the output.
struct Out {
    key: &'static str,
    dtype: &'static str,
    width: usize,
    /// Values of rows `r`, row-major.
    values: Box<dyn Fn(Range<usize>) -> Vec<f64> + Sync + 'static>,
}

fn columns(ds: &D4rlDataset, fps: u32, episode_of: Arc<Vec<(i64, i64)>>) -> Vec<Out> {
    let (od, ad) = (ds.obs_dim, ds.act_dim);
    let obs = Arc::new(ds.observations.clone());
    let act = Arc::new(ds.actions.clone());
    let rew = Arc::new(ds.rewards.clone());
    let term = Arc::new(ds.terminals.clone());
    let interv =
        Arc::new(ds.infos.get("infos/intervention").map(|c| c.data.clone()).unwrap_or_else(|| vec![0.0; ds.len()]));
    let f = |v: &Arc<Vec<f32>>, w: usize| {
        let v = v.clone();
        Box::new(move |r: Range<usize>| v[r.start * w..r.end * w].iter().map(|x| *x as f64).collect::<Vec<f64>>())
            as Box<dyn Fn(Range<usize>) -> Vec<f64> + Sync>
    };
    let e1 = episode_of.clone();
    let e2 = episode_of.clone();
    let fps = fps as f64;
    vec![
        Out { key: DEFAULT_OBSERVATION, dtype: "float32", width: od, values: f(&obs, od) },
        Out { key: DEFAULT_ACTION, dtype: "float32", width: ad, values: f(&act, ad) },
        Out { key: DEFAULT_REWARD, dtype: "float32", width: 1, values: f(&rew, 1) },
        Out { key: DEFAULT_DONE, dtype: "bool", width: 1, values: f(&term, 1) },
        Out { key: DEFAULT_INTERVENTION, dtype: "float32", width: 1, values: f(&interv, 1) },
        Out {
            key: "timestamp",
            dtype: "float32",
            width: 1,
            values: Box::new(move |r| r.map(|i| (e1[i].1 as f64 / fps) as f32 as f64).collect()),
        },
        Out {
            key: "frame_index",
            dtype: "int64",
            width: 1,
            values: Box::new(move |r| r.map(|i| e2[i].1 as f64).collect()),
        },
        Out {
            key: "episode_index",
            dtype: "int64",
            width: 1,
            values: Box::new(move |r| r.map(|i| episode_of[i].0 as f64).collect()),
        },
        Out { key: "index", dtype: "int64", width: 1, values: Box::new(|r| r.map(|i| i as f64).collect()) },
        Out { key: "task_index", dtype: "int64", width: 1, values: Box::new(|r| r.map(|_| 0.0).collect()) },
    ]
}

fn arrow_type(o: &Out) -> DataType {
    let scalar = match o.dtype {
        "bool" => DataType::Boolean,
        "int64" => DataType::Int64,
        _ => DataType::Float32,
    };
    if o.width == 1 {
        scalar
    } else {
        DataType::FixedSizeList(Arc::new(Field::new("item", scalar, true)), o.width as i32)
    }
}

fn arrow_array(o: &Out, rows: Range<usize>) -> Result<ArrayRef> {
    let v = (o.values)(rows);
    let flat: ArrayRef = match o.dtype {
        "bool" => Arc::new(BooleanArray::from(v.iter().map(|x| *x != 0.0).collect::<Vec<_>>())),
        "int64" => Arc::new(Int64Array::from(v.iter().map(|x| *x as i64).collect::<Vec<_>>())),
        _ => Arc::new(Float32Array::from(v.iter().map(|x| *x as f32).collect::<Vec<_>>())),
    };
    if o.width == 1 {
        return Ok(flat);
    }
    let field = Arc::new(Field::new("item", flat.data_type().clone(), true));
    FixedSizeListArray::try_new(field, o.width as i32, flat, None)
        .map(|a| Arc::new(a) as ArrayRef)
        .map_err(|e| DatasetError::Invalid(format!("building the `{}` column: {e}", o.key)))
}

fn props(extra: Option<Vec<KeyValue>>) -> WriterProperties {
    WriterProperties::builder().set_compression(Compression::SNAPPY).set_key_value_metadata(extra).build()
}

fn write_parquet(
    path: &Path,
    schema: Arc<Schema>,
    batches: impl IntoIterator<Item = Result<RecordBatch>>,
    extra: Option<Vec<KeyValue>>,
) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| DatasetError::io(dir, e))?;
    }
    let file = File::create(path).map_err(|e| DatasetError::io(path, e))?;
    let mut w = ArrowWriter::try_new(file, schema, Some(props(extra))).map_err(|e| parquet_err(path, e))?;
    for b in batches {
        w.write(&b?).map_err(|e| parquet_err(path, e))?;
        // One row group per batch (per episode in data files, as LeRobot writes them).
        w.flush().map_err(|e| parquet_err(path, e))?;
    }
    w.close().map_err(|e| parquet_err(path, e))?;
    Ok(())
}

fn batch(schema: &Arc<Schema>, arrays: Vec<ArrayRef>, path: &Path) -> Result<RecordBatch> {
    RecordBatch::try_new(schema.clone(), arrays).map_err(|e| parquet_err(path, e))
}

/// Writes `ds` as a LeRobotDataset v3.0 folder at `out` (which must not exist), atomically.
pub fn write_v30(ds: &D4rlDataset, out: &Path, opts: &WriteOptions) -> Result<WriteSummary> {
    if out.exists() {
        return Err(DatasetError::io(
            out,
            std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "already exists; a LeRobotDataset is written to a new folder",
            ),
        ));
    }
    if opts.fps == 0 || opts.chunks_size == 0 || opts.data_files_size_in_mb <= 0.0 {
        return Err(DatasetError::Invalid(format!(
            "LeRobot writer: fps, chunks_size and data_files_size_in_mb must be positive, found {}, {}, {}",
            opts.fps, opts.chunks_size, opts.data_files_size_in_mb
        )));
    }
    let tmp = crate::atomic::temp_path(out);
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| DatasetError::io(&tmp, e))?;
    }
    let result = write_into(ds, &tmp, opts)
        .and_then(|s| std::fs::rename(&tmp, out).map(|()| s).map_err(|e| DatasetError::io(out, e)));
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

fn write_into(ds: &D4rlDataset, root: &Path, opts: &WriteOptions) -> Result<WriteSummary> {
    let episodes: Vec<Range<usize>> = ds.episodes(opts.max_episode_steps).into_iter().map(|e| e.rows).collect();
    let n = ds.len();
    let mut episode_of = vec![(0i64, 0i64); n];
    for (e, r) in episodes.iter().enumerate() {
        for i in r.clone() {
            episode_of[i] = (e as i64, (i - r.start) as i64);
        }
    }
    let cols = columns(ds, opts.fps, Arc::new(episode_of));
    let schema =
        Arc::new(Schema::new(cols.iter().map(|o| Field::new(o.key, arrow_type(o), false)).collect::<Vec<_>>()));

    // Data files: whole episodes, a new file when the size budget would be passed.
    let row_bytes = cols.iter().map(|o| o.width * if o.dtype == "int64" { 8 } else { 4 }).sum::<usize>().max(1);
    let budget_rows = ((opts.data_files_size_in_mb * 1024.0 * 1024.0) / row_bytes as f64).max(1.0) as usize;
    let mut files: Vec<Vec<usize>> = Vec::new(); // episode numbers per file
    let mut rows_in_file = 0;
    for (e, r) in episodes.iter().enumerate() {
        if files.is_empty() || (rows_in_file > 0 && rows_in_file + r.len() > budget_rows) {
            files.push(Vec::new());
            rows_in_file = 0;
        }
        if let Some(f) = files.last_mut() {
            f.push(e);
        }
        rows_in_file += r.len();
    }
    let mut file_of_episode = vec![(0u64, 0u64); episodes.len()];
    let mut data_files = Vec::new();
    for (k, eps) in files.iter().enumerate() {
        let (chunk, file) = ((k / opts.chunks_size) as u64, (k % opts.chunks_size) as u64);
        let rel = PathBuf::from(
            format_template(DATA_PATH, &[("chunk_index", chunk), ("file_index", file)])
                .map_err(DatasetError::Invalid)?,
        );
        let path = root.join(&rel);
        let batches = eps.iter().map(|&e| {
            let arrays = cols.iter().map(|o| arrow_array(o, episodes[e].clone())).collect::<Result<Vec<_>>>()?;
            batch(&schema, arrays, &path)
        });
        write_parquet(&path, schema.clone(), batches, None)?;
        for &e in eps {
            file_of_episode[e] = (chunk, file);
        }
        data_files.push(rel);
    }

    write_episodes(root, &episodes, &file_of_episode, &cols, &opts.task)?;
    write_tasks(root, &opts.task)?;
    let mut stats = Map::new();
    for o in &cols {
        stats.insert(o.key.into(), feature_stats(&(o.values)(0..n), o.width).to_json());
    }
    write_json(&root.join("meta/stats.json"), &Value::Object(stats))?;
    write_json(&root.join("meta/info.json"), &info_json(&cols, episodes.len(), n, opts))?;
    Ok(WriteSummary { episodes: episodes.len(), frames: n, data_files })
}

fn info_json(cols: &[Out], episodes: usize, frames: usize, opts: &WriteOptions) -> Value {
    let mut features = Map::new();
    for o in cols {
        features.insert(o.key.into(), json!({"dtype": o.dtype, "shape": [o.width], "names": null}));
    }
    json!({
        "codebase_version": "v3.0",
        "robot_type": opts.robot_type,
        "total_episodes": episodes,
        "total_frames": frames,
        "total_tasks": 1,
        "chunks_size": opts.chunks_size,
        "data_files_size_in_mb": opts.data_files_size_in_mb,
        "video_files_size_in_mb": 200,
        "fps": opts.fps,
        "splits": {"train": format!("0:{episodes}")},
        "data_path": DATA_PATH,
        "video_path": null,
        "features": features,
    })
}

fn write_json(path: &Path, v: &Value) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| DatasetError::io(dir, e))?;
    }
    let text =
        serde_json::to_string_pretty(v).map_err(|e| DatasetError::Invalid(format!("{}: {e}", path.display())))?;
    std::fs::write(path, text).map_err(|e| DatasetError::io(path, e))
}

/// `meta/episodes/chunk-000/file-000.parquet`.
fn write_episodes(
    root: &Path,
    episodes: &[Range<usize>],
    files: &[(u64, u64)],
    cols: &[Out],
    task: &str,
) -> Result<()> {
    let path = root.join(EPISODES_FILE);
    let int = |v: Vec<i64>| Arc::new(Int64Array::from(v)) as ArrayRef;
    let mut fields = vec![Field::new("episode_index", DataType::Int64, false)];
    let mut arrays = vec![int((0..episodes.len() as i64).collect())];
    let mut tasks = ListBuilder::new(StringBuilder::new());
    for _ in episodes {
        tasks.values().append_value(task);
        tasks.append(true);
    }
    let tasks: ListArray = tasks.finish();
    fields.push(Field::new("tasks", tasks.data_type().clone(), true));
    arrays.push(Arc::new(tasks));
    let mut push_int = |name: &str, v: Vec<i64>| {
        fields.push(Field::new(name, DataType::Int64, false));
        arrays.push(int(v));
    };
    push_int("length", episodes.iter().map(|r| r.len() as i64).collect());
    push_int("data/chunk_index", files.iter().map(|f| f.0 as i64).collect());
    push_int("data/file_index", files.iter().map(|f| f.1 as i64).collect());
    push_int("dataset_from_index", episodes.iter().map(|r| r.start as i64).collect());
    push_int("dataset_to_index", episodes.iter().map(|r| r.end as i64).collect());
    push_int("meta/episodes/chunk_index", vec![0; episodes.len()]);
    push_int("meta/episodes/file_index", vec![0; episodes.len()]);
    // Per-episode statistics, `stats/<feature>/<stat>`, lists of float64 (count: int64).
    let per_episode: Vec<Vec<FeatureStats>> = cols
        .iter()
        .map(|o| episodes.iter().map(|r| feature_stats(&(o.values)(r.clone()), o.width)).collect())
        .collect();
    for (o, stats) in cols.iter().zip(&per_episode) {
        let names: Vec<&str> = stats.first().map(|s| s.entries().iter().map(|(n, _)| *n).collect()).unwrap_or_default();
        for (k, name) in names.iter().enumerate() {
            let rows: Vec<Vec<f64>> = stats.iter().map(|s| s.entries().swap_remove(k).1).collect();
            let values = Float64Array::from(rows.concat());
            let offsets = arrow_buffer_offsets(&rows);
            let field = Arc::new(Field::new("item", DataType::Float64, true));
            let list = ListArray::try_new(field.clone(), offsets, Arc::new(values), None)
                .map_err(|e| DatasetError::Invalid(format!("stats column: {e}")))?;
            fields.push(Field::new(format!("stats/{}/{name}", o.key), DataType::List(field), false));
            arrays.push(Arc::new(list));
        }
        let counts = Int64Array::from(stats.iter().map(|s| s.count as i64).collect::<Vec<_>>());
        let field = Arc::new(Field::new("item", DataType::Int64, true));
        let offsets = arrow_buffer_offsets(&vec![vec![0.0]; stats.len()]);
        let list = ListArray::try_new(field.clone(), offsets, Arc::new(counts), None)
            .map_err(|e| DatasetError::Invalid(format!("stats count column: {e}")))?;
        fields.push(Field::new(format!("stats/{}/count", o.key), DataType::List(field), false));
        arrays.push(Arc::new(list));
    }
    let schema = Arc::new(Schema::new(fields));
    let b = batch(&schema, arrays, &path)?;
    write_parquet(&path, schema, [Ok(b)], None)
}

fn arrow_buffer_offsets(rows: &[Vec<f64>]) -> arrow_buffer::OffsetBuffer<i32> {
    arrow_buffer::OffsetBuffer::from_lengths(rows.iter().map(|r| r.len()))
}

/// `meta/tasks.parquet` as pandas writes a frame indexed by the task strings, so
/// `pd.read_parquet` gives LeRobot its `tasks` frame back.
fn write_tasks(root: &Path, task: &str) -> Result<()> {
    let path = root.join("meta/tasks.parquet");
    let pandas = json!({
        "index_columns": ["__index_level_0__"],
        "column_indexes": [{"name": null, "field_name": null, "pandas_type": "unicode", "numpy_type": "object", "metadata": {"encoding": "UTF-8"}}],
        "columns": [
            {"name": "task_index", "field_name": "task_index", "pandas_type": "int64", "numpy_type": "int64", "metadata": null},
            {"name": null, "field_name": "__index_level_0__", "pandas_type": "unicode", "numpy_type": "object", "metadata": null}
        ],
        "attributes": {},
        "creator": {"library": "o2o", "version": env!("CARGO_PKG_VERSION")},
        "pandas_version": "2.2.0"
    })
    .to_string();
    let schema = Arc::new(Schema::new_with_metadata(
        vec![Field::new("task_index", DataType::Int64, true), Field::new("__index_level_0__", DataType::Utf8, true)],
        [("pandas".to_string(), pandas.clone())].into_iter().collect(),
    ));
    let b =
        batch(&schema, vec![Arc::new(Int64Array::from(vec![0i64])), Arc::new(StringArray::from(vec![task]))], &path)?;
    write_parquet(&path, schema, [Ok(b)], Some(vec![KeyValue::new("pandas".into(), pandas)]))
}
