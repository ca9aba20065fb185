//! LeRobotDataset folders (Hugging Face LeRobot): a reader for v3.0 and v2.x and a v3.0
//! writer, in Rust, with no Python.
//!
//! **Layout read.** `meta/info.json` (version, fps, the `data_path` template, the features);
//! v3.0: `meta/episodes/chunk-*/file-*.parquet` (one row per episode: length and the
//! `data/chunk_index`, `data/file_index` of its data file) and `data/…` files holding many
//! episodes each; v2.0/v2.1: `meta/episodes.jsonl` and one `data/…/episode_NNNNNN.parquet` per
//! episode. Data files are every file the `data_path` template matches (any chunk and file
//! count), and an episode's frames are found by `episode_index`, as LeRobot itself reads them.
//!
//! **Mapping to o2o's transitions** (each key can be changed with [`LeRobotKeys`]):
//!
//! | LeRobot feature | o2o column |
//! |---|---|
//! | `observation.state` (several keys are concatenated in order) | `observations` |
//! | `action` | `actions` |
//! | `next.reward` (absent: 0, with a warning) | `rewards` |
//! | `next.done` (absent: never) | `terminals` |
//! | an episode's last frame without `next.done` | `timeouts` (a time-limit end) |
//! | `complementary_info.is_intervention` | `infos/intervention` (as robot recordings) |
//!
//! LeRobot stores no next state: s' of a frame is the next frame of its episode, so the result
//! has no `next_observations` and transitions follow the D4RL rules for such files (an episode's
//! last frame is kept only when it terminates; see [`crate::d4rl`]'s builders).
//! Video and image features are listed in [`LeRobotDataset::skipped`] and not decoded.
//!
//! Design choice: the reader is built on the `parquet` crate directly rather than `re_lerobot`
//! (Rerun's reader, same version as o2o's Rerun): that crate turns episodes into Rerun chunks
//! and pulls Rerun's video stack in, while o2o needs flat columns and a writer too.

mod info;
mod parquet_io;
mod read;
mod stats;
mod write;

pub use info::{format_template, Feature, Info, IMPLICIT_COLUMNS, INFO_PATH, SUPPORTED_VERSIONS};
pub use read::{EpisodeMeta, LeRobotDataset};
pub use write::{write_v30, WriteOptions, WriteSummary};

use serde::{Deserialize, Serialize};
use std::path::Path;

/// Which LeRobot features become which o2o columns. `None` is the default key, read when the
/// dataset has it; a key given explicitly must exist.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LeRobotKeys {
    /// Features concatenated, in order, into the observation (default `["observation.state"]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub observation: Vec<String>,
    /// The action feature (default `action`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// The reward feature (default `next.reward`; absent: rewards are 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reward: Option<String>,
    /// The termination flag (default `next.done`; absent: no frame terminates).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub done: Option<String>,
    /// The operator-intervention flag (default `complementary_info.is_intervention`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervention: Option<String>,
}

/// Default feature keys.
pub const DEFAULT_OBSERVATION: &str = "observation.state";
/// Default action key.
pub const DEFAULT_ACTION: &str = "action";
/// Default reward key (HIL-SERL's).
pub const DEFAULT_REWARD: &str = "next.reward";
/// Default termination key (HIL-SERL's).
pub const DEFAULT_DONE: &str = "next.done";
/// Default intervention key.
pub const DEFAULT_INTERVENTION: &str = "complementary_info.is_intervention";

/// Whether `path` is a LeRobotDataset folder (it has `meta/info.json`).
pub fn is_lerobot_dir(path: &Path) -> bool {
    path.join(INFO_PATH).is_file()
}
