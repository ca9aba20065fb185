//! `meta/info.json`: the version, frame rate, path templates, totals and the feature table of a
//! LeRobotDataset, and the Python-style path templates (`data/chunk-{chunk_index:03d}/…`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::{DatasetError, Result};

/// The `codebase_version`s this reader understands: v2.0 and v2.1 (one Parquet file per
/// episode, `meta/episodes.jsonl`) and v3.0 (many episodes per file, `meta/episodes/*.parquet`).
pub const SUPPORTED_VERSIONS: [&str; 3] = ["v2.0", "v2.1", "v3.0"];

/// The path of `meta/info.json` under a dataset root.
pub const INFO_PATH: &str = "meta/info.json";

/// The five columns every LeRobot frame has besides its features.
pub const IMPLICIT_COLUMNS: [&str; 5] = ["timestamp", "frame_index", "episode_index", "index", "task_index"];

/// One entry of `features`.
#[derive(Debug, Clone, PartialEq)]
pub struct Feature {
    /// `float32`, `int64`, `bool`, `string`, `image`, `video`, …
    pub dtype: String,
    /// Shape of one frame's value (`[1]` for scalars, `[C, H, W]` or `[H, W, C]` for cameras).
    pub shape: Vec<usize>,
    /// `names`, as written (a list of joint names, a dict, or null).
    pub names: Value,
}

impl Feature {
    /// Numbers per frame (the product of the shape).
    pub fn width(&self) -> usize {
        self.shape.iter().product()
    }

    /// A camera stream (`video`, stored as MP4 files, or `image`, stored as encoded bytes).
    pub fn is_visual(&self) -> bool {
        matches!(self.dtype.as_str(), "video" | "image")
    }

    /// A numeric or boolean column o2o can read as numbers.
    pub fn is_numeric(&self) -> bool {
        matches!(
            self.dtype.as_str(),
            "float16"
                | "float32"
                | "float64"
                | "int8"
                | "int16"
                | "int32"
                | "int64"
                | "uint8"
                | "uint16"
                | "uint32"
                | "uint64"
                | "bool"
        )
    }
}

/// `meta/info.json`, parsed and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Info {
    /// The file (for messages).
    pub path: PathBuf,
    /// `codebase_version`, one of [`SUPPORTED_VERSIONS`].
    pub codebase_version: String,
    /// `fps`: frames per second.
    pub fps: f64,
    /// `robot_type`, when given.
    pub robot_type: Option<String>,
    /// `total_episodes`.
    pub total_episodes: usize,
    /// `total_frames`.
    pub total_frames: usize,
    /// `chunks_size`: files per chunk folder (v3.0) or episodes per chunk (v2.x).
    pub chunks_size: usize,
    /// `data_path`: the template of the data files.
    pub data_path: String,
    /// `features`, by key.
    pub features: BTreeMap<String, Feature>,
    /// The whole file, for keys this struct does not name.
    pub raw: Map<String, Value>,
}

impl Info {
    /// Reads `<root>/meta/info.json`.
    pub fn read(root: &Path) -> Result<Self> {
        let path = root.join(INFO_PATH);
        if !path.is_file() {
            return Err(DatasetError::MissingFile {
                path,
                expected: "a LeRobotDataset folder: meta/info.json, meta/episodes and data/".into(),
            });
        }
        let text = std::fs::read_to_string(&path).map_err(|e| DatasetError::io(&path, e))?;
        let raw: Map<String, Value> = serde_json::from_str(&text).map_err(|e| DatasetError::BadMetadata {
            path: path.clone(),
            message: format!("not a JSON object: {e}"),
        })?;
        Self::parse(path, raw)
    }

    /// Checks the parsed object of `path`.
    pub fn parse(path: PathBuf, raw: Map<String, Value>) -> Result<Self> {
        let bad = |key: &str, expected: &str, found: &Value| DatasetError::BadValue {
            path: path.clone(),
            key: key.into(),
            expected: expected.into(),
            found: found.to_string(),
        };
        let get = |key: &str, expected: &str| {
            raw.get(key).ok_or_else(|| DatasetError::MissingKey {
                path: path.clone(),
                key: key.into(),
                expected: expected.into(),
            })
        };
        let version_value = get("codebase_version", "the format version, e.g. \"v3.0\"")?;
        let codebase_version = match version_value.as_str() {
            Some(v) if SUPPORTED_VERSIONS.contains(&v) => v.to_string(),
            _ => {
                return Err(bad(
                    "codebase_version",
                    &format!("one of {SUPPORTED_VERSIONS:?} (older datasets: convert them with lerobot's converters)"),
                    version_value,
                ))
            }
        };
        let fps_value = get("fps", "the frame rate, a positive number")?;
        let fps = fps_value.as_f64().filter(|f| *f > 0.0).ok_or_else(|| bad("fps", "a positive number", fps_value))?;
        let count = |key: &str| -> Result<usize> {
            let v = get(key, "a non-negative integer")?;
            v.as_u64().map(|n| n as usize).ok_or_else(|| bad(key, "a non-negative integer", v))
        };
        let total_episodes = count("total_episodes")?;
        let total_frames = count("total_frames")?;
        let chunks_size = count("chunks_size")?;
        if chunks_size == 0 {
            return Err(bad("chunks_size", "a positive integer", &Value::from(0)));
        }
        let data_path_value = get(
            "data_path",
            "the data file template, e.g. \"data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet\"",
        )?;
        let data_path =
            data_path_value.as_str().ok_or_else(|| bad("data_path", "a string", data_path_value))?.to_string();
        let robot_type = raw.get("robot_type").and_then(|v| v.as_str()).map(str::to_string);
        let features_value = get("features", "the feature table")?;
        let table = features_value.as_object().ok_or_else(|| bad("features", "an object", features_value))?;
        let mut features = BTreeMap::new();
        for (key, f) in table {
            let fkey = format!("features.{key}");
            let dtype = f.get("dtype").and_then(|d| d.as_str()).ok_or_else(|| DatasetError::MissingKey {
                path: path.clone(),
                key: format!("{fkey}.dtype"),
                expected: "a dtype string such as \"float32\"".into(),
            })?;
            let shape_value = f.get("shape").ok_or_else(|| DatasetError::MissingKey {
                path: path.clone(),
                key: format!("{fkey}.shape"),
                expected: "a list of dimensions".into(),
            })?;
            let shape = shape_value
                .as_array()
                .and_then(|dims| dims.iter().map(|d| d.as_u64().map(|n| n as usize)).collect::<Option<Vec<_>>>())
                .ok_or_else(|| bad(&format!("{fkey}.shape"), "a list of non-negative integers", shape_value))?;
            let names = f.get("names").cloned().unwrap_or(Value::Null);
            features.insert(key.clone(), Feature { dtype: dtype.to_string(), shape, names });
        }
        Ok(Self {
            path,
            codebase_version,
            fps,
            robot_type,
            total_episodes,
            total_frames,
            chunks_size,
            data_path,
            features,
            raw,
        })
    }

    /// Whether the layout is v3.0 (many episodes per file) rather than v2.x (one per file).
    pub fn is_v3(&self) -> bool {
        self.codebase_version == "v3.0"
    }

    /// The keys of video and image features, which o2o lists and does not read.
    pub fn visual_keys(&self) -> Vec<String> {
        self.features.iter().filter(|(_, f)| f.is_visual()).map(|(k, _)| k.clone()).collect()
    }

    /// `data_path` filled with `fields`, relative to the dataset root.
    pub fn data_file(&self, fields: &[(&str, u64)]) -> Result<PathBuf> {
        format_template(&self.data_path, fields).map(PathBuf::from).map_err(|found| DatasetError::BadValue {
            path: self.path.clone(),
            key: "data_path".into(),
            expected: format!(
                "a template whose fields are among {:?}",
                fields.iter().map(|(name, _)| *name).collect::<Vec<_>>()
            ),
            found,
        })
    }
}

/// Fills a Python format template (`{name}`, `{name:03d}`, `{name:d}`) with integer fields.
/// Errors with a description of the first field it cannot fill.
pub fn format_template(template: &str, fields: &[(&str, u64)]) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(template.len() + 8);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if let Some(stripped) = after.strip_prefix('{') {
            out.push('{');
            rest = stripped;
            continue;
        }
        let close = after.find('}').ok_or_else(|| format!("{template:?} (an unclosed `{{`)"))?;
        let spec = &after[..close];
        let (name, format) = spec.split_once(':').unwrap_or((spec, ""));
        let value = fields
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .ok_or_else(|| format!("{template:?} (field `{name}`)"))?;
        let width = match format {
            "" | "d" => 0,
            f => f
                .strip_suffix('d')
                .and_then(|w| w.strip_prefix('0').or(Some(w)))
                .and_then(|w| w.parse::<usize>().ok())
                .ok_or_else(|| format!("{template:?} (format `{f}` of field `{name}`)"))?,
        };
        out.push_str(&format!("{value:0width$}"));
        rest = &after[close + 1..];
    }
    out.push_str(&rest.replace("}}", "}"));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templates_fill_like_python_format() {
        let f = [("chunk_index", 1), ("file_index", 23)];
        assert_eq!(
            format_template("data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet", &f).unwrap(),
            "data/chunk-001/file-023.parquet"
        );
        assert_eq!(format_template("x/{file_index}/{{lit}}", &f).unwrap(), "x/23/{lit}");
        assert_eq!(
            format_template(
                "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet",
                &[("episode_chunk", 0), ("episode_index", 42)]
            )
            .unwrap(),
            "data/chunk-000/episode_000042.parquet"
        );
        assert!(format_template("{video_key}/x", &f).unwrap_err().contains("video_key"));
        assert!(format_template("{chunk_index:>3}", &f).is_err());
        assert!(format_template("{chunk_index", &f).is_err());
    }

    fn minimal() -> Map<String, Value> {
        json!({
            "codebase_version": "v3.0", "fps": 30, "total_episodes": 2, "total_frames": 10,
            "chunks_size": 1000, "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet",
            "features": {"action": {"dtype": "float32", "shape": [2], "names": null},
                         "observation.images.top": {"dtype": "video", "shape": [3, 8, 8]}}
        })
        .as_object()
        .unwrap()
        .clone()
    }

    #[test]
    fn parses_and_rejects_with_the_key() {
        let info = Info::parse("i.json".into(), minimal()).unwrap();
        assert!(info.is_v3());
        assert_eq!(info.features["action"].width(), 2);
        assert_eq!(info.visual_keys(), vec!["observation.images.top".to_string()]);

        let mut old = minimal();
        old.insert("codebase_version".into(), json!("v1.6"));
        let msg = Info::parse("i.json".into(), old).unwrap_err().to_string();
        assert!(msg.contains("i.json") && msg.contains("codebase_version") && msg.contains("v1.6"), "{msg}");

        let mut no_fps = minimal();
        no_fps.remove("fps");
        let msg = Info::parse("i.json".into(), no_fps).unwrap_err().to_string();
        assert!(msg.contains("missing key `fps`"), "{msg}");

        let mut bad_shape = minimal();
        bad_shape["features"]["action"]["shape"] = json!(["two"]);
        let msg = Info::parse("i.json".into(), bad_shape).unwrap_err().to_string();
        assert!(msg.contains("features.action.shape"), "{msg}");
    }

    #[test]
    fn a_folder_without_info_json_names_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let msg = Info::read(tmp.path()).unwrap_err().to_string();
        assert!(msg.contains("meta/info.json") && msg.contains("missing"), "{msg}");
    }
}
