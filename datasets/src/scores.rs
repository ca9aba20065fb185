//! D4RL normalized scores and the reward-preprocessing presets of the reference codebases.
//!
//! Normalized score (algorithms.md §7.1, D4RL `get_normalized_score` ×100):
//! `100 · (R − REF_MIN) / (REF_MAX − REF_MIN)`, R the undiscounted return in the **raw** env
//! reward. The table is the same for every dataset and version of a family (§7.2).

use crate::error::{DatasetError, Result};
use serde::{Deserialize, Serialize};

/// `(family, REF_MIN_SCORE, REF_MAX_SCORE)` from D4RL `infos.py` (algorithms.md §7.2).
pub const REF_SCORES: [(&str, f64, f64); 10] = [
    ("halfcheetah", -280.178953, 12135.0),
    ("hopper", -20.272305, 3234.3),
    ("walker2d", 1.629008, 4592.3),
    ("ant", -325.6, 3879.7),
    ("antmaze", 0.0, 1.0),
    ("pen", 96.262799, 3076.8331017826877),
    ("door", -56.512833, 2880.5693087298737),
    ("hammer", -274.856578, 12794.134825156867),
    ("relocate", -6.425911, 4233.877797728884),
    ("kitchen", 0.0, 4.0),
];

/// `(REF_MIN, REF_MAX)` of a normalization family (`hopper`, `antmaze`, …).
pub fn ref_scores(family: &str) -> Result<(f64, f64)> {
    REF_SCORES.iter().find(|(f, _, _)| *f == family).map(|&(_, lo, hi)| (lo, hi)).ok_or_else(|| {
        DatasetError::Invalid(format!(
            "unknown normalization family `{family}`; known: {}",
            REF_SCORES.map(|r| r.0).join(", ")
        ))
    })
}

/// D4RL normalized score ×100 of an undiscounted raw-reward return.
pub fn normalized_score(family: &str, episode_return: f64) -> Result<f64> {
    let (lo, hi) = ref_scores(family)?;
    Ok(100.0 * (episode_return - lo) / (hi - lo))
}

/// Named reward preprocessing used by the reference implementations (algorithms.md §7.4).
/// Applied to training rewards only; scores are always computed on raw rewards. In a run
/// config (`[dataset] reward`) it is written by its name ([`RewardPreset::ALL`]), and an unknown
/// name is a serde error listing the known ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RewardPreset {
    /// Rewards unchanged.
    #[default]
    None,
    /// IQL locomotion: `r · 1000 / (R_max − R_min)`, R over the dataset's episode returns.
    IqlLocomotion,
    /// IQL / RLPD AntMaze: `r − 1`.
    #[serde(rename = "antmaze-minus-one")]
    AntMazeMinusOne,
    /// Cal-QL / CQL / WSRL AntMaze: `10 r − 5`.
    #[serde(rename = "calql-antmaze")]
    CalQlAntMaze,
    /// Cal-QL / WSRL Adroit binary: `10 r + 5`.
    AdroitBinary,
    /// WSRL Kitchen: `r − 4`.
    KitchenMinusFour,
}

impl RewardPreset {
    /// Every preset with its name.
    pub const ALL: [(&'static str, RewardPreset); 6] = [
        ("none", RewardPreset::None),
        ("iql-locomotion", RewardPreset::IqlLocomotion),
        ("antmaze-minus-one", RewardPreset::AntMazeMinusOne),
        ("calql-antmaze", RewardPreset::CalQlAntMaze),
        ("adroit-binary", RewardPreset::AdroitBinary),
        ("kitchen-minus-four", RewardPreset::KitchenMinusFour),
    ];

    /// The preset called `name` (see [`RewardPreset::ALL`]).
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, p)| *p).ok_or_else(|| {
            DatasetError::Invalid(format!(
                "unknown reward preset `{name}`; known: {}",
                Self::ALL.map(|p| p.0).join(", ")
            ))
        })
    }

    /// The preset's name (`calql-antmaze`), as a run config writes it.
    pub fn name(&self) -> &'static str {
        Self::ALL.iter().find(|(_, p)| p == self).map_or("", |(n, _)| n)
    }

    /// The failure reward after preprocessing for sparse tasks (for the MC-return all-failure
    /// convention): AntMaze −1 / −5, Adroit binary −5 (raw −1).
    pub fn sparse_failure_reward(&self) -> Option<f32> {
        match self {
            RewardPreset::AntMazeMinusOne => Some(-1.0),
            RewardPreset::CalQlAntMaze => Some(-5.0),
            RewardPreset::AdroitBinary => Some(-5.0),
            _ => None,
        }
    }

    /// Transforms `rewards` in place. `episode_returns` (undiscounted, raw) is needed by
    /// [`RewardPreset::IqlLocomotion`] only.
    pub fn apply(&self, rewards: &mut [f32], episode_returns: &[f64]) -> Result<()> {
        let affine =
            |rewards: &mut [f32], scale: f32, shift: f32| rewards.iter_mut().for_each(|r| *r = *r * scale + shift);
        match self {
            RewardPreset::None => {}
            RewardPreset::IqlLocomotion => {
                let max = episode_returns.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let min = episode_returns.iter().copied().fold(f64::INFINITY, f64::min);
                if episode_returns.is_empty() || max - min <= 0.0 {
                    return Err(DatasetError::Invalid(format!(
                        "iql-locomotion reward scaling needs episodes with different returns, found {} episodes, returns in [{min}, {max}]",
                        episode_returns.len()
                    )));
                }
                affine(rewards, (1000.0 / (max - min)) as f32, 0.0);
            }
            RewardPreset::AntMazeMinusOne => affine(rewards, 1.0, -1.0),
            RewardPreset::CalQlAntMaze => affine(rewards, 10.0, -5.0),
            RewardPreset::AdroitBinary => affine(rewards, 10.0, 5.0),
            RewardPreset::KitchenMinusFour => affine(rewards, 1.0, -4.0),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalized_scores_hit_0_and_100_at_the_references() {
        for (family, lo, hi) in REF_SCORES {
            assert!(normalized_score(family, lo).unwrap().abs() < 1e-9);
            assert!((normalized_score(family, hi).unwrap() - 100.0).abs() < 1e-9);
        }
        // hopper: (1617.0 + 20.272305) / (3234.3 + 20.272305) · 100 = 50.31…
        assert!((normalized_score("hopper", 1617.0).unwrap() - 50.3067).abs() < 1e-3);
        assert!(normalized_score("cartpole", 1.0).is_err());
    }

    #[test]
    fn presets_transform_as_documented() {
        let mut r = vec![0.0, 1.0];
        RewardPreset::CalQlAntMaze.apply(&mut r, &[]).unwrap();
        assert_eq!(r, vec![-5.0, 5.0]);
        let mut r = vec![0.0, 1.0];
        RewardPreset::AdroitBinary.apply(&mut r, &[]).unwrap();
        assert_eq!(r, vec![5.0, 15.0]);
        let mut r = vec![4.0];
        RewardPreset::KitchenMinusFour.apply(&mut r, &[]).unwrap();
        assert_eq!(r, vec![0.0]);
        let mut r = vec![1.0];
        RewardPreset::AntMazeMinusOne.apply(&mut r, &[]).unwrap();
        assert_eq!(r, vec![0.0]);
        let mut r = vec![2.0];
        RewardPreset::IqlLocomotion.apply(&mut r, &[1000.0, 3000.0]).unwrap();
        assert_eq!(r, vec![1.0]);
        assert!(RewardPreset::IqlLocomotion.apply(&mut r, &[5.0]).is_err());
        assert_eq!(RewardPreset::from_name("calql-antmaze").unwrap(), RewardPreset::CalQlAntMaze);
        assert!(RewardPreset::from_name("nope").is_err());
    }

    /// A config's name of every preset (serde) is its name in [`RewardPreset::ALL`].
    #[test]
    fn serde_names_are_the_table_names() {
        for (name, preset) in RewardPreset::ALL {
            assert_eq!(serde_json::to_value(preset).unwrap(), serde_json::Value::String(name.into()));
            assert_eq!(serde_json::from_value::<RewardPreset>(name.into()).unwrap(), preset);
            assert_eq!(preset.name(), name);
        }
        let err = serde_json::from_value::<RewardPreset>("nope".into()).unwrap_err().to_string();
        assert!(err.contains("nope") && err.contains("calql-antmaze"), "{err}");
    }
}
