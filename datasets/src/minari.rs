//! Minari datasets (formats.md §2): reader, writer, and conversion to and from D4RL.
//!
//! A Minari dataset is a folder `<id>/data/` holding `metadata.json` and `main_data.hdf5`.
//! The HDF5 file has one group per episode, `episode_0 … episode_{E−1}`, each with `T + 1`
//! observations (the reset observation first, the final s_T last), `T` actions, rewards,
//! `terminations` and `truncations`. Transition t is `(obs[t], act[t], rew[t], obs[t+1])`.
//!
//! `metadata.json` is written by Python's `json.dumps`, which emits ±∞ and NaN as the bare
//! tokens `Infinity`, `-Infinity`, `NaN`: invalid JSON that serde_json rejects. The Box space
//! fields (`observation_space`, `action_space`) are strings that hold such JSON. We read with a
//! lenient pass that turns bare tokens into marker strings, and write them back as bare tokens,
//! so a file round-trips byte-compatible in content.
//!
//! Only flat `Box` observation and action spaces are supported (the MuJoCo and D4RL ports);
//! `Dict`/`Tuple` spaces are reported as an error naming the key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use crate::atomic::write_atomic;
use crate::d4rl::D4rlDataset;
use crate::error::{DatasetError, Result};
use crate::h5util::{self, Dtype};

/// One Minari episode.
#[derive(Debug, Clone, PartialEq)]
pub struct MinariEpisode {
    /// The episode's `id` attribute.
    pub id: i64,
    /// The reset seed, when recorded.
    pub seed: Option<i64>,
    /// `[(T + 1) * obs_dim]`.
    pub observations: Vec<f32>,
    /// `[T * act_dim]`.
    pub actions: Vec<f32>,
    /// `[T]`.
    pub rewards: Vec<f32>,
    /// `[T]`, 1.0 on a true termination.
    pub terminations: Vec<f32>,
    /// `[T]`, 1.0 on a time-limit truncation.
    pub truncations: Vec<f32>,
}

impl MinariEpisode {
    /// Number of steps T.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// Whether the episode has no steps.
    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }
}

/// A Minari dataset in memory.
#[derive(Debug, Clone, PartialEq)]
pub struct MinariDataset {
    /// The `data/` folder it was read from (for messages).
    pub source: PathBuf,
    /// `metadata.json` as parsed (±∞/NaN kept as marker strings, see the module docs).
    pub metadata: Map<String, Value>,
    /// Observation size.
    pub obs_dim: usize,
    /// Action size.
    pub act_dim: usize,
    /// Stored dtypes of `observations`, `actions`, `rewards`.
    pub dtypes: BTreeMap<String, Dtype>,
    /// The episodes, in order.
    pub episodes: Vec<MinariEpisode>,
}

const POS_INF: &str = "__o2o_json_Infinity__";
const NEG_INF: &str = "__o2o_json_-Infinity__";
const NAN: &str = "__o2o_json_NaN__";

/// Parses JSON that may contain Python's bare `Infinity`, `-Infinity` and `NaN` tokens; they
/// become marker strings (written back as bare tokens by [`to_python_json`]).
pub fn parse_python_json(text: &str) -> std::result::Result<Value, serde_json::Error> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    let mut in_str = false;
    while let Some((i, c)) = chars.next() {
        if in_str {
            out.push(c);
            if c == '\\' {
                if let Some((_, n)) = chars.next() {
                    out.push(n);
                }
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        let rest = &text[i..];
        let (token, marker) = if rest.starts_with("-Infinity") {
            ("-Infinity", NEG_INF)
        } else if rest.starts_with("Infinity") {
            ("Infinity", POS_INF)
        } else if rest.starts_with("NaN") {
            ("NaN", NAN)
        } else {
            if c == '"' {
                in_str = true;
            }
            out.push(c);
            continue;
        };
        out.push_str(&format!("\"{marker}\""));
        for _ in 1..token.len() {
            chars.next();
        }
    }
    serde_json::from_str(&out)
}

/// Serializes like Python's `json.dumps`: marker strings become bare `Infinity`/`NaN` tokens.
pub fn to_python_json(v: &Value) -> String {
    serde_json::to_string(v)
        .unwrap_or_default()
        .replace(&format!("\"{POS_INF}\""), "Infinity")
        .replace(&format!("\"{NEG_INF}\""), "-Infinity")
        .replace(&format!("\"{NAN}\""), "NaN")
}

/// A Box space's shape from its JSON-in-a-string description.
fn box_dim(path: &Path, key: &str, meta: &Map<String, Value>) -> Result<Option<usize>> {
    let Some(v) = meta.get(key) else { return Ok(None) };
    let bad = |message: String| DatasetError::BadMetadata { path: path.into(), message };
    let space = match v {
        Value::String(s) => parse_python_json(s).map_err(|e| bad(format!("`{key}` is not valid space JSON: {e}")))?,
        Value::Object(_) => v.clone(),
        _ => return Ok(None),
    };
    let ty = space.get("type").and_then(Value::as_str).unwrap_or("");
    if ty != "Box" {
        return Err(bad(format!("`{key}` is a `{ty}` space; o2o supports flat Box spaces only")));
    }
    let shape: Vec<usize> = space
        .get("shape")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_u64).map(|x| x as usize).collect())
        .unwrap_or_default();
    Ok(Some(shape.iter().product()))
}

/// Python's JSON for a float32 Box space of size `dim`, unbounded (as `json.dumps` writes it).
fn box_space_json(dim: usize, dtype: Dtype) -> String {
    let inf = vec![POS_INF; dim];
    let ninf = vec![NEG_INF; dim];
    to_python_json(&json!({"type": "Box", "dtype": dtype.name(), "shape": [dim], "low": ninf, "high": inf}))
}

impl MinariDataset {
    /// Reads a Minari dataset from its folder (`<id>/` or `<id>/data/`).
    pub fn read(dir: &Path) -> Result<Self> {
        let data = if dir.join("data").is_dir() { dir.join("data") } else { dir.to_path_buf() };
        let meta_path = data.join("metadata.json");
        let text = std::fs::read_to_string(&meta_path).map_err(|e| DatasetError::io(&meta_path, e))?;
        let metadata = match parse_python_json(&text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                return Err(DatasetError::BadMetadata { path: meta_path, message: "expected a JSON object".into() })
            }
            Err(e) => return Err(DatasetError::BadMetadata { path: meta_path, message: format!("invalid JSON: {e}") }),
        };
        let h5 = data.join("main_data.hdf5");
        let file = h5util::open(&h5)?;
        let mut names: Vec<(usize, String)> = file
            .member_names()
            .map_err(|e| h5util::h5err(&h5, "/", e))?
            .into_iter()
            .filter_map(|n| n.strip_prefix("episode_").and_then(|k| k.parse().ok()).map(|k| (k, n.clone())))
            .collect();
        names.sort();
        let mut dtypes = BTreeMap::new();
        let mut episodes = Vec::with_capacity(names.len());
        let (mut obs_dim, mut act_dim) =
            (box_dim(&meta_path, "observation_space", &metadata)?, box_dim(&meta_path, "action_space", &metadata)?);
        for (k, name) in &names {
            let g = file.group(name).map_err(|e| h5util::h5err(&h5, name, e))?;
            let key = |s: &str| format!("{name}/{s}");
            for sub in ["observations", "actions", "rewards", "terminations", "truncations"] {
                if !h5util::has(&g, sub) {
                    return Err(DatasetError::MissingKey {
                        path: h5.clone(),
                        key: key(sub),
                        expected: "a Minari episode (observations, actions, rewards, terminations, truncations)".into(),
                    });
                }
                if g.group(sub).is_ok() {
                    return Err(DatasetError::WrongShape {
                        path: h5.clone(),
                        key: key(sub),
                        expected: "a flat array (Dict/Tuple spaces are not supported)".into(),
                        found: vec![],
                    });
                }
            }
            let o = h5util::read_numeric(&h5, &g, "observations").map_err(|e| rekey(e, name))?;
            let a = h5util::read_numeric(&h5, &g, "actions").map_err(|e| rekey(e, name))?;
            let r = h5util::read_numeric(&h5, &g, "rewards").map_err(|e| rekey(e, name))?;
            let te = h5util::read_numeric(&h5, &g, "terminations").map_err(|e| rekey(e, name))?;
            let tr = h5util::read_numeric(&h5, &g, "truncations").map_err(|e| rekey(e, name))?;
            let t = r.shape.first().copied().unwrap_or(0);
            let od = o.shape.get(1..).map(|s| s.iter().product()).unwrap_or(1);
            let ad = a.shape.get(1..).map(|s| s.iter().product()).unwrap_or(1);
            if o.shape.first() != Some(&(t + 1)) {
                return Err(DatasetError::LengthMismatch {
                    path: h5.clone(),
                    key: key("observations"),
                    reference: key("rewards") + " + 1",
                    expected: t + 1,
                    found: o.shape.first().copied().unwrap_or(0),
                });
            }
            for (sub, c) in [("actions", &a), ("terminations", &te), ("truncations", &tr)] {
                if c.shape.first() != Some(&t) {
                    return Err(DatasetError::LengthMismatch {
                        path: h5.clone(),
                        key: key(sub),
                        reference: key("rewards"),
                        expected: t,
                        found: c.shape.first().copied().unwrap_or(0),
                    });
                }
            }
            let od_expected = *obs_dim.get_or_insert(od);
            let ad_expected = *act_dim.get_or_insert(ad);
            if od != od_expected || ad != ad_expected {
                let (sub, e, _) =
                    if od != od_expected { ("observations", od_expected, od) } else { ("actions", ad_expected, ad) };
                return Err(DatasetError::WrongShape {
                    path: h5.clone(),
                    key: key(sub),
                    expected: format!("{e} columns (the space in metadata.json / the first episode)"),
                    found: if sub == "observations" { o.shape.clone() } else { a.shape.clone() },
                });
            }
            for (sub, c, w) in [("observations", &o, od), ("actions", &a, ad), ("rewards", &r, 1)] {
                if let Some((row, column, value)) = h5util::first_non_finite(&c.data, w) {
                    return Err(DatasetError::NonFinite { path: h5.clone(), key: key(sub), row, column, value });
                }
            }
            if *k == 0 {
                dtypes.insert("observations".into(), o.dtype);
                dtypes.insert("actions".into(), a.dtype);
                dtypes.insert("rewards".into(), r.dtype);
            }
            let attr_i64 = |n: &str| g.attr(n).ok().and_then(|a| a.read_scalar::<i64>().ok());
            episodes.push(MinariEpisode {
                id: attr_i64("id").unwrap_or(*k as i64),
                seed: attr_i64("seed"),
                observations: o.data,
                actions: a.data,
                rewards: r.data,
                terminations: te.data.iter().map(|&v| (v != 0.0) as u8 as f32).collect(),
                truncations: tr.data.iter().map(|&v| (v != 0.0) as u8 as f32).collect(),
            });
        }
        Ok(Self {
            source: data,
            metadata,
            obs_dim: obs_dim.unwrap_or(0),
            act_dim: act_dim.unwrap_or(0),
            dtypes,
            episodes,
        })
    }

    /// Total number of steps (transitions).
    pub fn total_steps(&self) -> usize {
        self.episodes.iter().map(|e| e.len()).sum()
    }

    /// Writes the dataset into `dir/data/` (`metadata.json` and `main_data.hdf5`, each written
    /// to a temp file and renamed). `total_episodes` and `total_steps` are updated.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let data = dir.join("data");
        std::fs::create_dir_all(&data).map_err(|e| DatasetError::io(&data, e))?;
        let h5 = data.join("main_data.hdf5");
        write_atomic(&h5, |tmp| self.write_hdf5(tmp))?;
        let mut meta = self.metadata.clone();
        meta.insert("total_episodes".into(), json!(self.episodes.len()));
        meta.insert("total_steps".into(), json!(self.total_steps()));
        meta.entry("data_format").or_insert(json!("hdf5"));
        let meta_path = data.join("metadata.json");
        write_atomic(&meta_path, |tmp| {
            std::fs::write(tmp, to_python_json(&Value::Object(meta))).map_err(|e| DatasetError::io(tmp, e))
        })
    }

    fn write_hdf5(&self, tmp: &Path) -> Result<()> {
        let file = h5util::create(tmp)?;
        let dt = |k: &str, d: Dtype| self.dtypes.get(k).copied().unwrap_or(d);
        for (k, ep) in self.episodes.iter().enumerate() {
            let name = format!("episode_{k}");
            let g = file.create_group(&name).map_err(|e| h5util::h5err(tmp, &name, e))?;
            let t = ep.len();
            h5util::write_column(
                tmp,
                &g,
                "observations",
                &[t + 1, self.obs_dim],
                dt("observations", Dtype::Float64),
                &ep.observations,
            )?;
            h5util::write_column(tmp, &g, "actions", &[t, self.act_dim], dt("actions", Dtype::Float32), &ep.actions)?;
            h5util::write_column(tmp, &g, "rewards", &[t], dt("rewards", Dtype::Float64), &ep.rewards)?;
            h5util::write_column(tmp, &g, "terminations", &[t], Dtype::Bool, &ep.terminations)?;
            h5util::write_column(tmp, &g, "truncations", &[t], Dtype::Bool, &ep.truncations)?;
            let attr = |n: &str, v: i64| {
                g.new_attr::<i64>()
                    .shape(())
                    .create(n)
                    .and_then(|a| a.write_scalar(&v))
                    .map_err(|e| h5util::h5err(tmp, &format!("{name}@{n}"), e))
            };
            attr("id", ep.id)?;
            attr("total_steps", t as i64)?;
            if let Some(s) = ep.seed {
                attr("seed", s)?;
            }
        }
        file.close().map_err(|e| h5util::h5err(tmp, "/", e))
    }

    /// The same data as a D4RL dataset: one row per step, `next_observations` from
    /// `obs[t + 1]`, `terminals` = terminations, `timeouts` = truncations (float32, bool flags).
    pub fn to_d4rl(&self) -> D4rlDataset {
        let (od, ad) = (self.obs_dim, self.act_dim);
        let n = self.total_steps();
        let mut d = D4rlDataset {
            source: self.source.join("main_data.hdf5"),
            obs_dim: od,
            act_dim: ad,
            observations: Vec::with_capacity(n * od),
            actions: Vec::with_capacity(n * ad),
            rewards: Vec::with_capacity(n),
            terminals: Vec::with_capacity(n),
            timeouts: Some(Vec::with_capacity(n)),
            next_observations: Some(Vec::with_capacity(n * od)),
            infos: BTreeMap::new(),
            metadata: BTreeMap::new(),
            dtypes: BTreeMap::new(),
        };
        for ep in &self.episodes {
            let t = ep.len();
            d.observations.extend_from_slice(&ep.observations[..t * od]);
            if let Some(next) = d.next_observations.as_mut() {
                next.extend_from_slice(&ep.observations[od..(t + 1) * od]);
            }
            d.actions.extend_from_slice(&ep.actions);
            d.rewards.extend_from_slice(&ep.rewards);
            d.terminals.extend_from_slice(&ep.terminations);
            if let Some(to) = d.timeouts.as_mut() {
                to.extend_from_slice(&ep.truncations);
            }
        }
        d
    }

    /// A Minari dataset from a D4RL one, split at its episode ends (`max_episode_steps` for files
    /// without `timeouts`). Each episode's final observation is its last `next_observations`
    /// row. Without `next_observations` (AntMaze) a terminated episode repeats its last
    /// observation as s_T (never bootstrapped), and any other episode drops its last step,
    /// whose s' is unknown, and is marked truncated at the new last step.
    pub fn from_d4rl(d: &D4rlDataset, dataset_id: &str, max_episode_steps: Option<usize>) -> Self {
        let (od, ad) = (d.obs_dim, d.act_dim);
        let mut episodes = Vec::new();
        for ep in d.episodes(max_episode_steps) {
            let mut rows = ep.rows.clone();
            let last = rows.end - 1;
            let final_obs: Vec<f32> = match &d.next_observations {
                Some(next) => next[last * od..(last + 1) * od].to_vec(),
                None if ep.terminated => d.obs(last).to_vec(),
                None => {
                    rows.end -= 1;
                    d.obs(last).to_vec()
                }
            };
            if rows.is_empty() {
                continue;
            }
            let t = rows.len();
            let mut observations = d.observations[rows.start * od..rows.end * od].to_vec();
            observations.extend_from_slice(&final_obs);
            let mut truncations = vec![0.0; t];
            let mut terminations = d.terminals[rows.clone()].to_vec();
            if rows.end < ep.rows.end || ep.truncated {
                truncations[t - 1] = 1.0;
            }
            if !ep.terminated {
                terminations[t - 1] = 0.0;
            }
            episodes.push(MinariEpisode {
                id: episodes.len() as i64,
                seed: None,
                observations,
                actions: d.actions[rows.start * ad..rows.end * ad].to_vec(),
                rewards: d.rewards[rows.clone()].to_vec(),
                terminations,
                truncations,
            });
        }
        let float =
            |k: &str| d.dtypes.get(k).copied().filter(|t| matches!(t, Dtype::Float64)).unwrap_or(Dtype::Float32);
        let mut dtypes = BTreeMap::new();
        for k in ["observations", "actions", "rewards"] {
            dtypes.insert(k.to_string(), float(k));
        }
        let mut metadata = Map::new();
        metadata.insert("dataset_id".into(), json!(dataset_id));
        metadata.insert("data_format".into(), json!("hdf5"));
        metadata.insert("observation_space".into(), json!(box_space_json(od, float("observations"))));
        metadata.insert("action_space".into(), json!(box_space_json(ad, float("actions"))));
        metadata.insert("minari_version".into(), json!("0.5.3"));
        metadata.insert("algorithm_name".into(), json!("converted from D4RL by o2o"));
        metadata.insert("description".into(), json!(format!("Converted from {}", d.source.display())));
        if let Ok(e) = crate::registry::lookup(dataset_id) {
            if let Ok((lo, hi)) = crate::scores::ref_scores(e.family) {
                metadata.insert("ref_min_score".into(), json!(lo));
                metadata.insert("ref_max_score".into(), json!(hi));
            }
        }
        Self { source: d.source.clone(), metadata, obs_dim: od, act_dim: ad, dtypes, episodes }
    }
}

/// Prefixes an error's key with the episode group name.
fn rekey(e: DatasetError, group: &str) -> DatasetError {
    match e {
        DatasetError::Hdf5 { path, key, message } => {
            DatasetError::Hdf5 { path, key: format!("{group}/{key}"), message }
        }
        DatasetError::WrongDtype { path, key, expected, found } => {
            DatasetError::WrongDtype { path, key: format!("{group}/{key}"), expected, found }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_json_with_bare_infinity_round_trips() {
        let text = r#"{"a": Infinity, "b": [-Infinity, 1.5, NaN], "s": "Infinity stays a string", "space": "{\"low\": [-Infinity], \"high\": [Infinity]}"}"#;
        let v = parse_python_json(text).unwrap();
        assert_eq!(v["s"], "Infinity stays a string");
        assert_eq!(v["b"][1], 1.5);
        let out = to_python_json(&v);
        assert!(out.contains(r#""a":Infinity"#) && out.contains("[-Infinity,1.5,NaN]"), "{out}");
        assert_eq!(parse_python_json(&out).unwrap(), v);
        // The space string itself parses with the same lenient reader.
        let space = parse_python_json(v["space"].as_str().unwrap()).unwrap();
        assert_eq!(space["low"][0], NEG_INF);
        assert!(parse_python_json("{\"é\": Infinity}").is_ok());
    }
}
