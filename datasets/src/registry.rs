//! The registry of D4RL dataset ids: URL, size and SHA-256 where known (formats.md §1), the
//! matching env id, normalization family, observation/action sizes and time limit.
//!
//! Sizes and checksums come from the TensorFlow Datasets D4RL checksum lists (formats.md §1.2);
//! ids without one are downloaded without verification (the download prints the SHA-256 it
//! computed so it can be pinned). `env_id` is the o2o env for gym-mujoco (`hopper-v2`, the
//! D4RL-compatible v2 dynamics in o2o-envs), `{pen,door,hammer,relocate}-v1` for Adroit (every
//! Adroit dataset of a task was logged in the same env) and the D4RL env name otherwise (D4RL
//! registered each dataset id as its own env; o2o-envs registers the AntMaze ones). The obs/act table lets `o2o dataset info` check a file
//! against its env without depending on o2o-envs.

use crate::error::{DatasetError, Result};

/// Where every D4RL file lives (`d4rl/infos.py`).
pub const D4RL_BASE_URL: &str = "http://rail.eecs.berkeley.edu/datasets/offline_rl";

/// One registered dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryEntry {
    /// Dataset id, e.g. `hopper-medium-v2`.
    pub id: String,
    /// Download URL.
    pub url: String,
    /// File size in bytes, when known.
    pub bytes: Option<u64>,
    /// SHA-256 (hex), when known.
    pub sha256: Option<&'static str>,
    /// The env the data was collected in.
    pub env_id: String,
    /// Normalization family for [`crate::scores::normalized_score`].
    pub family: &'static str,
    /// Observation size.
    pub obs_dim: usize,
    /// Action size.
    pub act_dim: usize,
    /// The env's time limit.
    pub max_episode_steps: usize,
}

impl RegistryEntry {
    /// The file name in the cache (the last part of the URL, as D4RL names it).
    pub fn file_name(&self) -> &str {
        self.url.rsplit('/').next().unwrap_or(&self.url)
    }
}

/// Gym-MuJoCo v2: (env, dataset with underscores, bytes, sha256).
const GYM_MUJOCO_V2: [(&str, &str, u64, &str); 24] = [
    ("halfcheetah", "random", 237_338_037, "25407aef85b5d16c0f36b4149341edb4acc6a9e88c1db529b2de19e7464874ba"),
    ("halfcheetah", "medium", 237_727_262, "41324e8487a9556d8cfa4538827f8937f4d63dae3030825ebc9f3a726ed08ca0"),
    ("halfcheetah", "expert", 237_464_597, "d9fe53bb994eb1e20a99b4fa3412cd76a1bb7966a7ff55e0fcbdd6081bd2965f"),
    ("halfcheetah", "medium_replay", 59_448_533, "48d494a4770c11f48260736dec090b78bdca8375647ed4d24bfa5b6610c7f683"),
    ("halfcheetah", "full_replay", 291_381_762, "27fdf7ea86e5a2cbd24d611ae9e703c86ec2e8e52823abc69dd9af6afb3a36c0"),
    ("halfcheetah", "medium_expert", 474_567_252, "015db75dae5bbe8e94029b71fa0bafc2073365df0c94744e71031189f3f79c06"),
    ("hopper", "random", 152_525_345, "63103ef7059db4c0819bd054f4e83ff339030b50bcdb46bdbe50385f234b5054"),
    ("hopper", "medium", 152_756_557, "5bdf1bc4a713c82941de44633df669b36c89850b652a25985166796d25cf71a0"),
    ("hopper", "expert", 152_427_435, "01aa219a5f8eea5e639eccdc636ec2bf40e317159a95cf4bf6e985f16909941b"),
    ("hopper", "medium_replay", 75_854_457, "e121c5f7c9857a307baa9edc6a2c3b48e85fedb9ac316ecddd0f48ca7ef4e39b"),
    ("hopper", "full_replay", 187_998_921, "56baf95963c51c1e964049a974566c50ba80f289390565523e60c0ba83e0982e"),
    ("hopper", "medium_expert", 304_537_315, "9d51ad87f8c905be3880d84c6140bcdb7fbf39a19e046a237f238ba34fec9e26"),
    ("walker2d", "random", 216_109_364, "4e863bb6090cf4a461548bd470564b32f1ae5b32ef3085f816b2ede7f092e7fa"),
    ("walker2d", "medium", 232_254_996, "cf00f43add04c17fdfc2958dd581dea0851b2e5bedbe6fda073758a8f841aeda"),
    ("walker2d", "expert", 230_567_195, "2985dc3d436a8baa10e8f43f946fe1d7c6337a4e4fbc65def70618093b18c59a"),
    ("walker2d", "medium_replay", 86_323_963, "e75de96a4f77acf7d4e0d6fdf0d7ccb177c26c44bb4388e4fd99f543ccfa18db"),
    ("walker2d", "full_replay", 285_115_514, "f2720f9d27b2acef6ec9a7d9ad3b80b6c2078ad4467cee668a81e3b3c80bcf2a"),
    ("walker2d", "medium_expert", 462_197_079, "6b8d7f868c45bbaedf460be797fb7271b46dee6ebe45fe7a64319f2005b59a04"),
    ("ant", "random", 384_466_831, "93cc10893eed2b8e17f81d1aa51dc23d27c5ca101a3804249f6bd038c6f06055"),
    ("ant", "medium", 376_239_825, "461c03b9f70f40d66b47608a92965e4ef3642bd9cdb1320d10acc92754167137"),
    ("ant", "expert", 373_231_677, "fa22531ca79ea051006fa48bb652120d2e12c813919c530369a03c2688311b0f"),
    ("ant", "medium_replay", 136_482_252, "844c4e5743ef51091f2106a3570b257fb149032c4743f8a5f02f40adc3b42a46"),
    ("ant", "full_replay", 449_390_167, "b95b0a7f34b1d5d1bedfded0f8e9cfc508b59de83cd4cbfb65b18dbd5056f26c"),
    ("ant", "medium_expert", 748_335_217, "8cfb64e62d8944b5d9dada5f0cfc13a295fafe0c6ba58b778e32ebf16c95aef1"),
];

/// AntMaze v2: (dataset, file stem, bytes).
const ANTMAZE_V2: [(&str, &str, Option<u64>); 6] = [
    ("umaze", "u-maze_noisy_multistart_False_multigoal_False", Some(232_532_949)),
    ("umaze-diverse", "u-maze_noisy_multistart_True_multigoal_True", Some(230_854_272)),
    ("medium-play", "big-maze_noisy_multistart_True_multigoal_False", None),
    ("medium-diverse", "big-maze_noisy_multistart_True_multigoal_True", Some(231_095_166)),
    ("large-play", "hardest-maze_noisy_multistart_True_multigoal_False", Some(230_880_653)),
    ("large-diverse", "hardest-maze_noisy_multistart_True_multigoal_True", Some(231_183_710)),
];

/// Adroit v1: (task, obs_dim, act_dim, max_episode_steps).
const ADROIT: [(&str, usize, usize, usize); 4] =
    [("pen", 45, 24, 100), ("hammer", 46, 26, 200), ("door", 39, 28, 200), ("relocate", 39, 30, 200)];

/// Known Adroit v1 sizes (formats.md §1.4).
const ADROIT_BYTES: [(&str, u64); 3] =
    [("door-human-v1", 3_121_206), ("door-cloned-v1", 294_356_136), ("door-expert-v1", 536_056_678)];

/// Kitchen v0: (dataset, file name).
const KITCHEN: [(&str, &str); 3] = [
    ("complete", "mini_kitchen_microwave_kettle_light_slider-v0"),
    ("partial", "kitchen_microwave_kettle_light_slider-v0"),
    ("mixed", "kitchen_microwave_kettle_bottomburner_light-v0"),
];

/// Every registered id.
pub fn entries() -> Vec<RegistryEntry> {
    let mut out = Vec::new();
    for (env, dset, bytes, sha) in GYM_MUJOCO_V2 {
        let (obs_dim, act_dim) = match env {
            "halfcheetah" => (17, 6),
            "hopper" => (11, 3),
            "walker2d" => (17, 6),
            _ => (111, 8),
        };
        out.push(RegistryEntry {
            id: format!("{env}-{}-v2", dset.replace('_', "-")),
            url: format!("{D4RL_BASE_URL}/gym_mujoco_v2/{env}_{dset}-v2.hdf5"),
            bytes: Some(bytes),
            sha256: Some(sha),
            env_id: format!("{env}-v2"),
            family: env,
            obs_dim,
            act_dim,
            max_episode_steps: 1000,
        });
    }
    // v2 (the fixed timeouts) and v0 (the IQL and FamO2O papers' files; same data, the v0
    // timeouts of D4RL #77): one env id per dataset id, as D4RL registered them.
    for (version, folder, suffix) in [("v2", "ant_maze_v2", "_sparse_fixed"), ("v0", "ant_maze_new", "_sparse")] {
        for (dset, stem, bytes) in ANTMAZE_V2 {
            let id = format!("antmaze-{dset}-{version}");
            out.push(RegistryEntry {
                url: format!("{D4RL_BASE_URL}/{folder}/Ant_maze_{stem}{suffix}.hdf5"),
                bytes: if version == "v2" { bytes } else { None },
                sha256: None,
                env_id: id.clone(),
                id,
                family: "antmaze",
                obs_dim: 29,
                act_dim: 8,
                max_episode_steps: if dset.starts_with("umaze") { 700 } else { 1000 },
            });
        }
    }
    for (task, obs_dim, act_dim, max_episode_steps) in ADROIT {
        for dset in ["human", "cloned", "expert"] {
            let id = format!("{task}-{dset}-v1");
            out.push(RegistryEntry {
                url: format!("{D4RL_BASE_URL}/hand_dapg_v1/{id}.hdf5"),
                bytes: ADROIT_BYTES.iter().find(|(i, _)| *i == id).map(|(_, b)| *b),
                sha256: None,
                env_id: format!("{task}-v1"),
                id,
                family: task,
                obs_dim,
                act_dim,
                max_episode_steps,
            });
        }
    }
    for (dset, file) in KITCHEN {
        let id = format!("kitchen-{dset}-v0");
        out.push(RegistryEntry {
            url: format!("{D4RL_BASE_URL}/kitchen/{file}.hdf5"),
            bytes: None,
            sha256: None,
            env_id: id.clone(),
            id,
            family: "kitchen",
            obs_dim: 60,
            act_dim: 9,
            max_episode_steps: 280,
        });
    }
    out
}

/// The entry for `id`; an unknown id is an error that suggests the closest known id.
pub fn lookup(id: &str) -> Result<RegistryEntry> {
    let all = entries();
    if let Some(e) = all.iter().find(|e| e.id == id) {
        return Ok(e.clone());
    }
    let best = all.iter().min_by_key(|e| edit_distance(&e.id, id)).map(|e| e.id.clone());
    let hint = best.filter(|b| edit_distance(b, id) <= 4).map(|b| format!(", did you mean `{b}`?")).unwrap_or_default();
    Err(DatasetError::UnknownId { id: id.into(), hint })
}

/// The entry whose file name is `file_name` (to recognise a cached file by its name), or whose
/// id is the file's stem (`hopper-medium-v2.hdf5`, as `o2o dataset make-benchmark` names its files).
pub fn lookup_file(file_name: &str) -> Option<RegistryEntry> {
    let all = entries();
    let by_url = all.iter().position(|e| e.file_name() == file_name);
    let by_id = || all.iter().position(|e| file_name.strip_suffix(".hdf5") == Some(e.id.as_str()));
    by_url.or_else(by_id).map(|i| all[i].clone())
}

/// Levenshtein distance, for "did you mean".
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + (ca != *cb) as usize).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_covers_every_family_with_known_checksums() {
        let all = entries();
        assert_eq!(all.len(), 24 + 6 + 6 + 12 + 3);
        let e = lookup("hopper-medium-replay-v2").unwrap();
        assert_eq!(
            e.url,
            "http://rail.eecs.berkeley.edu/datasets/offline_rl/gym_mujoco_v2/hopper_medium_replay-v2.hdf5"
        );
        assert_eq!(e.bytes, Some(75_854_457));
        assert_eq!(e.sha256, Some("e121c5f7c9857a307baa9edc6a2c3b48e85fedb9ac316ecddd0f48ca7ef4e39b"));
        assert_eq!((e.obs_dim, e.act_dim, e.family, e.env_id.as_str()), (11, 3, "hopper", "hopper-v2"));
        let a = lookup("antmaze-large-diverse-v2").unwrap();
        assert!(a
            .url
            .ends_with("ant_maze_v2/Ant_maze_hardest-maze_noisy_multistart_True_multigoal_True_sparse_fixed.hdf5"));
        assert_eq!(lookup("kitchen-mixed-v0").unwrap().max_episode_steps, 280);
        assert_eq!(lookup("door-human-v1").unwrap().bytes, Some(3_121_206));
        assert_eq!(lookup("door-cloned-v1").unwrap().env_id, "door-v1");
        let v0 = lookup("antmaze-medium-play-v0").unwrap();
        assert!(v0.url.ends_with("ant_maze_new/Ant_maze_big-maze_noisy_multistart_True_multigoal_False_sparse.hdf5"));
        assert_eq!((v0.env_id.as_str(), v0.max_episode_steps), ("antmaze-medium-play-v0", 1000));
        for e in &all {
            crate::scores::ref_scores(e.family).unwrap();
        }
    }

    #[test]
    fn files_are_recognised_by_url_name_or_id() {
        assert_eq!(lookup_file("hopper_medium_replay-v2.hdf5").unwrap().id, "hopper-medium-replay-v2");
        assert_eq!(lookup_file("hopper-medium-replay-v2.hdf5").unwrap().id, "hopper-medium-replay-v2");
        assert_eq!(lookup_file("walker2d-random-v2.hdf5").unwrap().env_id, "walker2d-v2");
        assert!(lookup_file("hopper-medium-v2.h5").is_none());
        assert!(lookup_file("my-data.hdf5").is_none());
    }

    #[test]
    fn unknown_id_suggests_the_closest() {
        let err = lookup("hoper-medium-v2").unwrap_err().to_string();
        assert!(err.contains("hoper-medium-v2") && err.contains("did you mean `hopper-medium-v2`"), "{err}");
    }
}
