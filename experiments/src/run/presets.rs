//! Presets: small TOML files under `experiments/presets/`, compiled into the binary so
//! `--preset sac-hopper` works from any directory. A path to a `.toml` file works too.

use anyhow::{bail, Context, Result};
use std::path::Path;

/// Every embedded preset: (name, TOML text). The name is the file name without `.toml`.
pub const PRESETS: &[(&str, &str)] = &[
    ("sac-inverted-pendulum", include_str!("../../presets/sac-inverted-pendulum.toml")),
    ("sac-hopper", include_str!("../../presets/sac-hopper.toml")),
    ("sac-halfcheetah", include_str!("../../presets/sac-halfcheetah.toml")),
    ("sac-walker2d", include_str!("../../presets/sac-walker2d.toml")),
    ("sac-ant", include_str!("../../presets/sac-ant.toml")),
    ("iql-hopper-medium", include_str!("../../presets/iql-hopper-medium.toml")),
    ("iql-hopper-medium-replay", include_str!("../../presets/iql-hopper-medium-replay.toml")),
    ("iql-hopper-medium-expert", include_str!("../../presets/iql-hopper-medium-expert.toml")),
    ("iql-halfcheetah-medium", include_str!("../../presets/iql-halfcheetah-medium.toml")),
    ("iql-halfcheetah-medium-replay", include_str!("../../presets/iql-halfcheetah-medium-replay.toml")),
    ("iql-halfcheetah-medium-expert", include_str!("../../presets/iql-halfcheetah-medium-expert.toml")),
    ("iql-walker2d-medium", include_str!("../../presets/iql-walker2d-medium.toml")),
    ("iql-walker2d-medium-replay", include_str!("../../presets/iql-walker2d-medium-replay.toml")),
    ("iql-walker2d-medium-expert", include_str!("../../presets/iql-walker2d-medium-expert.toml")),
    ("cql-hopper-medium", include_str!("../../presets/cql-hopper-medium.toml")),
    ("cql-halfcheetah-medium", include_str!("../../presets/cql-halfcheetah-medium.toml")),
    ("cql-walker2d-medium", include_str!("../../presets/cql-walker2d-medium.toml")),
    ("calql-hopper-medium", include_str!("../../presets/calql-hopper-medium.toml")),
    ("calql-halfcheetah-medium", include_str!("../../presets/calql-halfcheetah-medium.toml")),
    ("calql-walker2d-medium", include_str!("../../presets/calql-walker2d-medium.toml")),
    ("rlpd-hopper-medium", include_str!("../../presets/rlpd-hopper-medium.toml")),
    ("rlpd-halfcheetah-medium", include_str!("../../presets/rlpd-halfcheetah-medium.toml")),
    ("rlpd-walker2d-medium", include_str!("../../presets/rlpd-walker2d-medium.toml")),
    ("wsrl-hopper-small", include_str!("../../presets/wsrl-hopper-small.toml")),
    ("wsrl-halfcheetah-small", include_str!("../../presets/wsrl-halfcheetah-small.toml")),
    ("wsrl-hopper-medium", include_str!("../../presets/wsrl-hopper-medium.toml")),
    ("wsrl-halfcheetah-medium", include_str!("../../presets/wsrl-halfcheetah-medium.toml")),
    ("wsrl-walker2d-medium", include_str!("../../presets/wsrl-walker2d-medium.toml")),
    ("sera-calql-hopper-small", include_str!("../../presets/sera-calql-hopper-small.toml")),
    ("sera-calql-halfcheetah-small", include_str!("../../presets/sera-calql-halfcheetah-small.toml")),
    ("sera-calql-antmaze-umaze-onearm-small", include_str!("../../presets/sera-calql-antmaze-umaze-onearm-small.toml")),
    ("sera-calql-hopper-medium", include_str!("../../presets/sera-calql-hopper-medium.toml")),
    ("sera-calql-halfcheetah-medium", include_str!("../../presets/sera-calql-halfcheetah-medium.toml")),
    ("sera-calql-walker2d-medium", include_str!("../../presets/sera-calql-walker2d-medium.toml")),
    ("sera-cql-hopper-medium", include_str!("../../presets/sera-cql-hopper-medium.toml")),
    ("sera-cql-halfcheetah-medium", include_str!("../../presets/sera-cql-halfcheetah-medium.toml")),
    ("sera-cql-walker2d-medium", include_str!("../../presets/sera-cql-walker2d-medium.toml")),
    ("famo2o-cql-halfcheetah-medium", include_str!("../../presets/famo2o-cql-halfcheetah-medium.toml")),
    ("famo2o-cql-halfcheetah-medium-expert", include_str!("../../presets/famo2o-cql-halfcheetah-medium-expert.toml")),
    ("famo2o-cql-halfcheetah-medium-replay", include_str!("../../presets/famo2o-cql-halfcheetah-medium-replay.toml")),
    ("famo2o-cql-hopper-medium", include_str!("../../presets/famo2o-cql-hopper-medium.toml")),
    ("famo2o-cql-hopper-medium-expert", include_str!("../../presets/famo2o-cql-hopper-medium-expert.toml")),
    ("famo2o-cql-hopper-medium-replay", include_str!("../../presets/famo2o-cql-hopper-medium-replay.toml")),
    ("famo2o-cql-walker2d-medium", include_str!("../../presets/famo2o-cql-walker2d-medium.toml")),
    ("famo2o-cql-walker2d-medium-expert", include_str!("../../presets/famo2o-cql-walker2d-medium-expert.toml")),
    ("famo2o-cql-walker2d-medium-replay", include_str!("../../presets/famo2o-cql-walker2d-medium-replay.toml")),
    ("famo2o-cql-hopper-small", include_str!("../../presets/famo2o-cql-hopper-small.toml")),
    ("famo2o-cql-halfcheetah-mixed-small", include_str!("../../presets/famo2o-cql-halfcheetah-mixed-small.toml")),
    ("famo2o-iql-antmaze-large-diverse", include_str!("../../presets/famo2o-iql-antmaze-large-diverse.toml")),
    ("famo2o-iql-antmaze-large-play", include_str!("../../presets/famo2o-iql-antmaze-large-play.toml")),
    ("famo2o-iql-antmaze-medium-diverse", include_str!("../../presets/famo2o-iql-antmaze-medium-diverse.toml")),
    ("famo2o-iql-antmaze-medium-play", include_str!("../../presets/famo2o-iql-antmaze-medium-play.toml")),
    ("famo2o-iql-antmaze-umaze", include_str!("../../presets/famo2o-iql-antmaze-umaze.toml")),
    ("famo2o-iql-antmaze-umaze-diverse", include_str!("../../presets/famo2o-iql-antmaze-umaze-diverse.toml")),
    ("famo2o-iql-hopper-small", include_str!("../../presets/famo2o-iql-hopper-small.toml")),
    ("iql-antmaze-umaze", include_str!("../../presets/iql-antmaze-umaze.toml")),
    ("iql-antmaze-umaze-diverse", include_str!("../../presets/iql-antmaze-umaze-diverse.toml")),
    ("iql-antmaze-medium-play", include_str!("../../presets/iql-antmaze-medium-play.toml")),
    ("iql-antmaze-medium-diverse", include_str!("../../presets/iql-antmaze-medium-diverse.toml")),
    ("iql-antmaze-large-play", include_str!("../../presets/iql-antmaze-large-play.toml")),
    ("iql-antmaze-large-diverse", include_str!("../../presets/iql-antmaze-large-diverse.toml")),
    ("cql-antmaze-umaze", include_str!("../../presets/cql-antmaze-umaze.toml")),
    ("cql-antmaze-umaze-diverse", include_str!("../../presets/cql-antmaze-umaze-diverse.toml")),
    ("cql-antmaze-medium-play", include_str!("../../presets/cql-antmaze-medium-play.toml")),
    ("cql-antmaze-medium-diverse", include_str!("../../presets/cql-antmaze-medium-diverse.toml")),
    ("cql-antmaze-large-play", include_str!("../../presets/cql-antmaze-large-play.toml")),
    ("cql-antmaze-large-diverse", include_str!("../../presets/cql-antmaze-large-diverse.toml")),
    ("calql-antmaze-umaze", include_str!("../../presets/calql-antmaze-umaze.toml")),
    ("calql-antmaze-umaze-diverse", include_str!("../../presets/calql-antmaze-umaze-diverse.toml")),
    ("calql-antmaze-medium-play", include_str!("../../presets/calql-antmaze-medium-play.toml")),
    ("calql-antmaze-medium-diverse", include_str!("../../presets/calql-antmaze-medium-diverse.toml")),
    ("calql-antmaze-large-play", include_str!("../../presets/calql-antmaze-large-play.toml")),
    ("calql-antmaze-large-diverse", include_str!("../../presets/calql-antmaze-large-diverse.toml")),
    ("wsrl-antmaze-umaze", include_str!("../../presets/wsrl-antmaze-umaze.toml")),
    ("wsrl-antmaze-umaze-diverse", include_str!("../../presets/wsrl-antmaze-umaze-diverse.toml")),
    ("wsrl-antmaze-medium-play", include_str!("../../presets/wsrl-antmaze-medium-play.toml")),
    ("wsrl-antmaze-medium-diverse", include_str!("../../presets/wsrl-antmaze-medium-diverse.toml")),
    ("wsrl-antmaze-large-play", include_str!("../../presets/wsrl-antmaze-large-play.toml")),
    ("wsrl-antmaze-large-diverse", include_str!("../../presets/wsrl-antmaze-large-diverse.toml")),
    ("rlpd-antmaze-umaze", include_str!("../../presets/rlpd-antmaze-umaze.toml")),
    ("rlpd-antmaze-umaze-diverse", include_str!("../../presets/rlpd-antmaze-umaze-diverse.toml")),
    ("rlpd-antmaze-medium-play", include_str!("../../presets/rlpd-antmaze-medium-play.toml")),
    ("rlpd-antmaze-medium-diverse", include_str!("../../presets/rlpd-antmaze-medium-diverse.toml")),
    ("rlpd-antmaze-large-play", include_str!("../../presets/rlpd-antmaze-large-play.toml")),
    ("rlpd-antmaze-large-diverse", include_str!("../../presets/rlpd-antmaze-large-diverse.toml")),
    ("rlpd-fetch-push-dopamine", include_str!("../../presets/rlpd-fetch-push-dopamine.toml")),
    ("calql-fetch-push-dopamine", include_str!("../../presets/calql-fetch-push-dopamine.toml")),
    ("sac-her-fetch-reach", include_str!("../../presets/sac-her-fetch-reach.toml")),
    ("ppo-inverted-pendulum", include_str!("../../presets/ppo-inverted-pendulum.toml")),
    ("ppo-hopper", include_str!("../../presets/ppo-hopper.toml")),
    ("ppo-halfcheetah", include_str!("../../presets/ppo-halfcheetah.toml")),
    ("unio4-hopper-small", include_str!("../../presets/unio4-hopper-small.toml")),
    ("unio4-halfcheetah-small", include_str!("../../presets/unio4-halfcheetah-small.toml")),
    ("unio4-hopper-medium", include_str!("../../presets/unio4-hopper-medium.toml")),
    ("unio4-hopper-medium-replay", include_str!("../../presets/unio4-hopper-medium-replay.toml")),
    ("unio4-hopper-medium-expert", include_str!("../../presets/unio4-hopper-medium-expert.toml")),
    ("unio4-halfcheetah-medium", include_str!("../../presets/unio4-halfcheetah-medium.toml")),
    ("unio4-halfcheetah-medium-replay", include_str!("../../presets/unio4-halfcheetah-medium-replay.toml")),
    ("unio4-halfcheetah-medium-expert", include_str!("../../presets/unio4-halfcheetah-medium-expert.toml")),
    ("unio4-walker2d-medium", include_str!("../../presets/unio4-walker2d-medium.toml")),
    ("unio4-walker2d-medium-replay", include_str!("../../presets/unio4-walker2d-medium-replay.toml")),
    ("unio4-walker2d-medium-expert", include_str!("../../presets/unio4-walker2d-medium-expert.toml")),
    ("sac-robot-sim", include_str!("../../presets/sac-robot-sim.toml")),
    ("rlpd-robot-sim", include_str!("../../presets/rlpd-robot-sim.toml")),
    ("wsrl-robot-sim", include_str!("../../presets/wsrl-robot-sim.toml")),
    ("cql-imaginebench-mujoco-real", include_str!("../../presets/cql-imaginebench-mujoco-real.toml")),
    ("cql-imaginebench-mujoco-real+imagined", include_str!("../../presets/cql-imaginebench-mujoco-real+imagined.toml")),
    ("iql-imaginebench-mujoco-real", include_str!("../../presets/iql-imaginebench-mujoco-real.toml")),
    ("iql-imaginebench-mujoco-real+imagined", include_str!("../../presets/iql-imaginebench-mujoco-real+imagined.toml")),
    ("bc-imaginebench-mujoco-real", include_str!("../../presets/bc-imaginebench-mujoco-real.toml")),
    ("bc-imaginebench-mujoco-real+imagined", include_str!("../../presets/bc-imaginebench-mujoco-real+imagined.toml")),
    ("td3bc-imaginebench-mujoco-real", include_str!("../../presets/td3bc-imaginebench-mujoco-real.toml")),
    (
        "td3bc-imaginebench-mujoco-real+imagined",
        include_str!("../../presets/td3bc-imaginebench-mujoco-real+imagined.toml"),
    ),
    (
        "calql-imaginebench-mujoco-hard-finetune",
        include_str!("../../presets/calql-imaginebench-mujoco-hard-finetune.toml"),
    ),
    ("calql-pen-binary", include_str!("../../presets/calql-pen-binary.toml")),
    ("calql-door-binary", include_str!("../../presets/calql-door-binary.toml")),
    ("calql-relocate-binary", include_str!("../../presets/calql-relocate-binary.toml")),
    ("wsrl-pen-binary", include_str!("../../presets/wsrl-pen-binary.toml")),
    ("wsrl-door-binary", include_str!("../../presets/wsrl-door-binary.toml")),
    ("wsrl-relocate-binary", include_str!("../../presets/wsrl-relocate-binary.toml")),
    ("rlpd-pen-binary", include_str!("../../presets/rlpd-pen-binary.toml")),
    ("rlpd-door-binary", include_str!("../../presets/rlpd-door-binary.toml")),
    ("rlpd-relocate-binary", include_str!("../../presets/rlpd-relocate-binary.toml")),
];

/// Preset names, in the order above.
pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// A preset by name, or a `.toml` file by path: (name, table). The name of a file is its stem.
pub fn load(name_or_path: &str) -> Result<(String, toml::Table)> {
    let path = Path::new(name_or_path);
    let (name, text, origin) = if name_or_path.ends_with(".toml") || path.components().count() > 1 {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read the preset file {}", path.display()))?;
        let stem = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "custom".into());
        (stem, text, path.display().to_string())
    } else {
        match PRESETS.iter().find(|(n, _)| *n == name_or_path) {
            Some((n, text)) => (n.to_string(), text.to_string(), format!("preset {n}")),
            None => bail!(
                "unknown preset `{name_or_path}`; known presets: {} (or give a path to a .toml file)",
                names().join(", ")
            ),
        }
    };
    let table: toml::Table = text.parse().with_context(|| format!("{origin} is not valid TOML"))?;
    if table.contains_key("preset") {
        bail!("{origin}: the key `preset` is set from the file name; remove it");
    }
    Ok((name, table))
}

#[cfg(test)]
mod tests {
    use super::super::config::RunConfig;
    use super::*;

    /// Every preset resolves into a valid run config and a valid agent config, and the
    /// algorithm it names is the one its file name starts with.
    #[test]
    fn every_preset_resolves_and_names_its_algorithm() {
        let dir = std::path::PathBuf::from(
            std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("presets");
        let files = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "toml"))
            .count();
        assert_eq!(files, PRESETS.len(), "every file in {} is listed in PRESETS", dir.display());
        for name in names() {
            let (n, mut table) = load(name).unwrap();
            assert_eq!(n, name);
            table.insert("preset".into(), toml::Value::String(n.clone()));
            let c = RunConfig::from_table(table, name).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            // A method layered on a base algorithm is named `<method>-<algo>-…` and switched on
            // in its own section.
            let base = match name.strip_prefix("sera-") {
                Some(rest) => {
                    assert!(c.sera.enabled, "{name} must enable [sera]");
                    rest
                }
                None => name,
            };
            assert!(base.starts_with(&format!("{}-", c.algo)), "{name} names algo {}", c.algo);
            assert_eq!(c.agent_config().unwrap().algo(), c.algo);
        }
    }

    /// The SAC presets start from the orthogonal initialization, the one the 5-seed Hopper
    /// study chose (BENCHMARKS.md, "The initialization study"): a preset that switches its
    /// init needs a study of its own.
    #[test]
    fn sac_presets_use_the_initialization_the_study_chose() {
        use o2o_agents::config::AgentConfig;
        use o2o_agents::nn::init::WeightInit;
        let mut checked = 0;
        for name in names().into_iter().filter(|n| n.starts_with("sac-")) {
            let (n, mut table) = load(name).unwrap();
            table.insert("preset".into(), toml::Value::String(n));
            let c = RunConfig::from_table(table, name).unwrap();
            let AgentConfig::Sac(sac) = c.agent_config().unwrap() else { panic!("{name} is not SAC") };
            assert_eq!(
                (sac.critic.init, sac.actor.mlp.init),
                (WeightInit::Orthogonal, WeightInit::Orthogonal),
                "{name}"
            );
            checked += 1;
        }
        assert!(checked >= 2, "only {checked} sac-* presets");
    }

    fn resolved(name: &str) -> RunConfig {
        let (n, mut table) = load(name).unwrap();
        table.insert("preset".into(), toml::Value::String(n));
        RunConfig::from_table(table, name).unwrap()
    }

    /// fidelity-audit-2 E6: every FamO2O preset samples one buffer of dataset + online rows
    /// uniformly, as the official code, and the FamO2O-CQL ones start the balance head as the
    /// official one (E7).
    #[test]
    fn famo2o_presets_mix_proportionally_with_the_official_balance_head() {
        use super::super::config::OfflineMix;
        use o2o_agents::config::AgentConfig;
        use o2o_agents::nn::BalanceHeadInit;
        let names: Vec<&str> = names().into_iter().filter(|n| n.starts_with("famo2o-")).collect();
        assert!(names.len() >= 10, "{names:?}");
        for name in names {
            let c = resolved(name);
            assert_eq!(c.train.offline_mix, OfflineMix::Proportional, "{name}");
            if let AgentConfig::Famo2oCql(f) = c.agent_config().unwrap() {
                assert_eq!(f.balance_head_init, BalanceHeadInit::VarianceScaling, "{name}");
                assert!(!f.balance_entropy, "{name}: the balance entropy is an opt-in deviation");
            }
        }
    }

    /// fidelity-audit-2 E8/E9: the SERA presets scale Q̂ and the states as VCSE does and give the
    /// bonus to online rows only.
    #[test]
    fn sera_presets_use_vcse_scaling_on_online_rows() {
        use o2o_agents::sera::{BonusRows, QScaling, StateScaling};
        let names: Vec<&str> = names().into_iter().filter(|n| n.starts_with("sera-")).collect();
        assert!(names.len() >= 7);
        for name in names {
            let c = resolved(name);
            assert_eq!(
                (c.sera.q_scaling, c.sera.state_scaling, c.sera.bonus_rows),
                (QScaling::BatchStandardize, StateScaling::Dimension, BonusRows::Online),
                "{name}"
            );
        }
    }

    /// fidelity-audit-2 E14: the BC and TD3+BC ImagineBench presets train as ImagineBench's
    /// d3rlpy runs do: raw states, 2×256 tanh encoders, BC batch 100.
    #[test]
    fn imaginebench_bc_and_td3bc_presets_are_in_parity_mode() {
        use o2o_agents::config::AgentConfig;
        use o2o_agents::nn::Activation;
        let mut checked = 0;
        for name in
            names().into_iter().filter(|n| n.starts_with("bc-imaginebench") || n.starts_with("td3bc-imaginebench"))
        {
            let c = resolved(name);
            match c.agent_config().unwrap() {
                AgentConfig::Bc(b) => {
                    assert!(!b.normalize_states, "{name}");
                    assert_eq!(
                        (b.actor.hidden.clone(), b.actor.activation),
                        (vec![256, 256], Activation::Tanh),
                        "{name}"
                    );
                    assert_eq!(c.train.batch_size, 100, "{name}");
                }
                AgentConfig::Td3bc(t) => {
                    assert!(!t.normalize_states, "{name}");
                    for m in [&t.actor, &t.critic] {
                        assert_eq!((m.hidden.clone(), m.activation), (vec![256, 256], Activation::Tanh), "{name}");
                    }
                    assert_eq!(c.train.batch_size, 256, "{name}");
                }
                other => panic!("{name}: {}", other.algo()),
            }
            checked += 1;
        }
        assert_eq!(checked, 4);
    }

    /// The file every preset must resolve to: each preset's table as [`load`] resolved it when
    /// every preset was written out in full (before `extends`, issue 48), one table per preset.
    fn resolved_fixture() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/presets-resolved.toml")
    }

    /// Every preset resolves to exactly its table in the fixture, and the fixture names no other:
    /// how presets are written (what they inherit) may change, what they resolve to may not.
    /// `O2O_BLESS_PRESETS=1` rewrites the fixture from the presets, for an intended change only.
    #[test]
    fn every_preset_resolves_to_its_fixture() {
        let mut all = toml::Table::new();
        for name in names() {
            all.insert(name.to_string(), toml::Value::Table(load(name).unwrap().1));
        }
        let path = resolved_fixture();
        if std::env::var_os("O2O_BLESS_PRESETS").is_some() {
            let header = "# Every preset's table as `o2o_experiments::run::presets::load` resolves it, one table per\n\
                          # preset; `every_preset_resolves_to_its_fixture` compares the presets against it. Written by\n\
                          # `O2O_BLESS_PRESETS=1 cargo test --release -p o2o-experiments --lib presets`, for an\n\
                          # intended change of a preset only.\n\n";
            std::fs::write(&path, format!("{header}{}", toml::to_string(&all).unwrap())).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let fixture: toml::Table = text.parse().unwrap();
        let (ours, theirs): (Vec<&String>, Vec<&String>) = (all.keys().collect(), fixture.keys().collect());
        assert_eq!(ours, theirs, "the presets are not the ones of {}", path.display());
        for (name, table) in &all {
            let want = fixture[name].as_table().unwrap();
            let table: &toml::Table = table.as_table().unwrap();
            assert!(
                table == want,
                "preset {name} resolves to\n{}\nbut {} holds\n{}",
                toml::to_string(table).unwrap(),
                path.display(),
                toml::to_string(want).unwrap()
            );
        }
    }

    #[test]
    fn unknown_preset_lists_the_known_ones() {
        let err = load("sac-hoper").unwrap_err().to_string();
        assert!(err.contains("sac-hopper") && err.contains("sac-hoper"), "{err}");
    }
}
