//! ImagineBench runs (formats.md §3): the env built from `[imaginebench]`, and the offline data
//! of a `[dataset] format = "imaginebench"` file.
//!
//! The dataset's rows and the env's observations must carry the same instruction vectors, so
//! both come from one encoder, resolved once from the config ([`encoder`]): ImagineBench's own
//! table (in the dataset file, or a converted table file) or the env crate's built-in
//! encoding. The dataset's rows get their sentence's vector from that encoder by text, whatever
//! the file stored. Which one was used goes into the run's manifest
//! (`instruction_embeddings`).
//!
//! Data mixes: `rows = "real"`, `"imaginary"` or `"both"`; with both, `real_fraction = f` draws
//! `round(f · B)` rows of each batch from the real rollouts (the paper's 1:1 is 0.5), and no
//! `real_fraction` samples uniformly over all rows, as the released code's one concatenated
//! buffer does (the real share is then `n_real / n` on average).

use super::actor::ActionScale;
use super::config::{DatasetConfig, ImagineBenchRunConfig, RunConfig};
use super::data::{OfflineData, SecondBuffer};
use super::learner::RewardTransform;
use super::rundir::DatasetInfo;
use anyhow::{bail, Context, Result};
use o2o_datasets::imaginebench::{read_instruction_table, ImagineBenchDataset, Rows};
use o2o_datasets::mc_returns::McConfig;
use o2o_datasets::OfflineBuffer;
use o2o_envs::imaginebench::{ImagineBenchOptions, InstructionEncoder, Instructions};
use o2o_envs::BoxSpace;
use std::collections::HashMap;
use std::path::Path;

/// Whether `env` is one of the ImagineBench ids.
pub fn is_imaginebench_env(env: &str) -> bool {
    o2o_envs::imaginebench::is_env_id(env)
}

/// The `[imaginebench]` section, or its defaults.
fn section(config: &RunConfig) -> ImagineBenchRunConfig {
    config.imaginebench.clone().unwrap_or_default()
}

/// A table encoder from a converted file's `instructions/*`.
fn table_encoder(path: &Path) -> Result<InstructionEncoder> {
    let (texts, dim, data) =
        read_instruction_table(path).with_context(|| format!("reading the instruction table of {}", path.display()))?;
    if dim == 0 {
        bail!("{} has no instruction vectors (`instructions/embedding` has 0 columns: it was converted without --encodings)", path.display());
    }
    let vectors: HashMap<String, Vec<f32>> = texts.into_iter().zip(data.chunks(dim).map(<[f32]>::to_vec)).collect();
    InstructionEncoder::table(path.display().to_string(), vectors).map_err(anyhow::Error::msg)
}

/// The run's instruction encoder (module docs): `[imaginebench] embeddings`, where `auto` takes
/// the ImagineBench dataset file's table when it has vectors, else the built-in encoding.
pub fn encoder(config: &RunConfig) -> Result<InstructionEncoder> {
    let ib = section(config);
    let data_file = config.dataset.as_ref().filter(|d| d.is_imaginebench()).and_then(|d| d.path.clone());
    let builtin = InstructionEncoder::BuiltIn { dim: ib.builtin_dim };
    match ib.embeddings.as_str() {
        "builtin" => Ok(builtin),
        "dataset" => {
            let p = data_file.context("key `imaginebench.embeddings` = \"dataset\" needs a [dataset] with format = \"imaginebench\" and a path")?;
            table_encoder(&p).context("key `imaginebench.embeddings` = \"dataset\"")
        }
        "auto" => match data_file {
            Some(p) if p.is_file() && read_instruction_table(&p).is_ok_and(|(_, dim, _)| dim > 0) => table_encoder(&p),
            _ => Ok(builtin),
        },
        path => table_encoder(Path::new(path)).with_context(|| format!("key `imaginebench.embeddings` = {path:?}")),
    }
}

/// The options of the run's ImagineBench env (`None` for other envs).
pub fn env_options(config: &RunConfig) -> Result<Option<ImagineBenchOptions>> {
    let Some(level) = o2o_envs::imaginebench::level_of_env_id(&config.env) else { return Ok(None) };
    let instructions =
        if section(config).instructions == "released" { Instructions::Released } else { Instructions::Fixed };
    Ok(Some(ImagineBenchOptions { level, tasks: None, instructions, encoder: encoder(config)? }))
}

/// Load an ImagineBench `[dataset]` for an env with `action_space` and `obs_dim` numbers
/// (18 + the encoder's size): rows chosen by `rows`, each followed by its sentence's vector
/// from `encoder`; with `mc`, per-trajectory Monte-Carlo returns.
pub fn load(
    cfg: &DatasetConfig,
    encoder: &InstructionEncoder,
    action_space: &BoxSpace,
    env_id: &str,
    obs_dim: usize,
    act_dim: usize,
    mc: Option<McConfig>,
) -> Result<OfflineData> {
    let path = cfg.path.clone().context("[dataset] with format = \"imaginebench\" needs `path`")?;
    if !path.is_file() {
        bail!("dataset.path {} does not exist", path.display());
    }
    let mut ds = ImagineBenchDataset::read(&path)
        .with_context(|| format!("reading the ImagineBench dataset {}", path.display()))?;
    let vectors = ds
        .instructions
        .iter()
        .map(|s| encoder.encode(s))
        .collect::<Result<Vec<_>, String>>()
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("instruction vectors for the sentences of {}", path.display()))?;
    ds.set_embeddings(encoder.dim(), vectors.concat())?;
    if ds.obs_dim + ds.embed_dim != obs_dim || ds.act_dim != act_dim {
        bail!(
            "dataset {}: observations of {} + {} instruction numbers and actions of {} do not fit the env {env_id} ({obs_dim} observation numbers, {act_dim} actions)",
            path.display(),
            ds.obs_dim,
            ds.embed_dim,
            ds.act_dim
        );
    }
    // Dataset actions are in the env's units; the agent acts in [-1, 1] (ImagineBench: identity).
    let scale = ActionScale::new(action_space, env_id)?;
    for row in ds.actions.chunks_mut(act_dim) {
        let a = scale.to_agent(row);
        row.copy_from_slice(&a);
    }
    let rows = cfg.rows.unwrap_or(Rows::All);
    let one = |rows: Rows| -> Result<(OfflineBuffer, Option<SecondBuffer>, Vec<f32>)> {
        let t = ds.transitions(rows, true, mc)?;
        let ends = t.episode_ends.clone();
        Ok((OfflineBuffer::new(t)?, None, ends))
    };
    // `episode_ends` follows the first buffer's rows; a weighted mix of two buffers has none
    // (only Uni-O4 reads them, and it takes a single buffer).
    let (buffer, second, episode_ends) = match (rows, cfg.real_fraction) {
        (Rows::All, Some(f)) => {
            let (real, imaginary) = ds.buffers(true, mc)?;
            (real, Some(SecondBuffer { buffer: imaginary, first_fraction: f }), Vec::new())
        }
        (rows, _) => one(rows)?,
    };
    let n = buffer.len() + second.as_ref().map_or(0, |s| s.buffer.len());
    if n == 0 {
        bail!("dataset {} has no {} rows", path.display(), rows.name());
    }
    let (sha256, _) = o2o_datasets::download::hash_file(&path)?;
    let info = DatasetInfo { id: cfg.id.clone(), path: path.display().to_string(), sha256, transitions: n };
    Ok(OfflineData { buffer, second, reward: RewardTransform::IDENTITY, info, episode_ends })
}
