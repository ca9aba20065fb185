//! Presets: TOML files under `experiments/presets/`, compiled into the binary so
//! `--preset sac-hopper` works from any directory. A path to a `.toml` file works too.
//!
//! **Inheritance.** A file may say `extends = "<name>"`: it is then the named preset or base
//! with the file's own keys laid on top (tables merge key by key; any other value, arrays
//! included, replaces the inherited one). Bases are the files under `presets/base/`: a family's
//! settings, with the comments that explain them, and no task, so they are not presets one runs.
//! A preset of a family is a few lines: `calql-antmaze-umaze.toml` is `extends = "calql-antmaze"`
//! plus its env and dataset id. A base may extend another (`calql-antmaze` is `cql-antmaze` with
//! calibration), a preset file of your own may extend any preset or base, and [`load`] returns the
//! resolved table, with no `extends` left in it. A table can add keys to what it inherits or
//! change them, never remove one.
//!
//! `build.rs` generates the table of embedded files ([`PRESETS`], [`BASES`]) from the two folders.

use anyhow::{anyhow, bail, Context, Result};
use std::path::Path;

include!(concat!(env!("OUT_DIR"), "/presets.rs"));

/// Preset names, sorted.
pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

/// A preset by name, or a `.toml` file by path: (name, table), its `extends` resolved. The name of
/// a file is its stem.
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
            None if BASES.iter().any(|(n, _)| *n == name_or_path) => bail!(
                "`{name_or_path}` is a base (experiments/presets/base/{name_or_path}.toml), which presets extend, not a preset to run; its presets: {}",
                extending(name_or_path).join(", ")
            ),
            None => bail!(
                "unknown preset `{name_or_path}`; known presets: {} (or give a path to a .toml file)",
                names().join(", ")
            ),
        }
    };
    Ok((name, resolve(&text, &origin, &embedded)?))
}

/// A config written as TOML text in a preset's format (`origin` names it in messages), its
/// `extends` resolved against the embedded presets and bases as a preset file's is.
pub fn resolve_text(text: &str, origin: &str) -> Result<toml::Table> {
    resolve(text, origin, &embedded)
}

/// An embedded preset or base by name: (origin for messages, text).
fn embedded(name: &str) -> Option<(String, &'static str)> {
    let preset = PRESETS.iter().find(|(n, _)| *n == name).map(|(n, t)| (format!("preset {n}"), *t));
    preset.or_else(|| BASES.iter().find(|(n, _)| *n == name).map(|(n, t)| (format!("base {n}"), *t)))
}

/// The presets whose own file extends `base`.
fn extending(base: &str) -> Vec<&'static str> {
    let extends = |text: &str| text.parse::<toml::Table>().ok()?.get("extends")?.as_str().map(str::to_string);
    PRESETS.iter().filter(|(_, t)| extends(t).as_deref() == Some(base)).map(|(n, _)| *n).collect()
}

/// The table of `text` (from `origin`) laid over everything it extends, found by `find`.
fn resolve(text: &str, origin: &str, find: &dyn Fn(&str) -> Option<(String, &'static str)>) -> Result<toml::Table> {
    let mut chain = vec![origin.to_string()];
    let mut layers = vec![parse(text, origin)?];
    while let Some(parent) = layers.last_mut().and_then(|t| t.remove("extends")) {
        let from = chain.last().cloned().unwrap_or_default();
        let parent = parent
            .as_str()
            .ok_or_else(|| anyhow!("{from}: key `extends`: expected the name of a preset or base, found {parent}"))?;
        let (origin, text) = find(parent).ok_or_else(|| {
            let bases: Vec<&str> = BASES.iter().map(|(n, _)| *n).collect();
            anyhow!(
                "{from}: key `extends`: no preset or base is named `{parent}`; bases: {}; presets: {}",
                bases.join(", "),
                names().join(", ")
            )
        })?;
        if chain.contains(&origin) {
            bail!("{from}: key `extends` makes a loop: {} → {origin}", chain.join(" → "));
        }
        layers.push(parse(text, &origin)?);
        chain.push(origin);
    }
    let mut table = layers.pop().unwrap_or_default();
    while let Some(over) = layers.pop() {
        merge(&mut table, over);
    }
    Ok(table)
}

/// One file's own table: valid TOML, and no `preset` key (that comes from the file name).
fn parse(text: &str, origin: &str) -> Result<toml::Table> {
    let table: toml::Table = text.parse().with_context(|| format!("{origin} is not valid TOML"))?;
    if table.contains_key("preset") {
        bail!("{origin}: the key `preset` is set from the file name; remove it");
    }
    Ok(table)
}

/// Lay `over` onto `base`: a table merges into a table key by key; any other value replaces.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(into)), toml::Value::Table(from)) => merge(into, from),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
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
            assert_eq!(c.agent.algo(), c.algo);
        }
    }

    /// Text in a preset's format resolves its `extends` as a file does: a base plus a preset's
    /// own keys is that preset, and a key laid on top replaces the inherited value.
    #[test]
    fn text_extends_a_base_as_a_preset_file_does() {
        let (_, preset) = load("iql-hopper-medium").unwrap();
        let text = "extends = \"iql-locomotion\"\nenv = \"hopper-v2\"\n[dataset]\nid = \"hopper-medium-v2\"\n";
        assert_eq!(resolve_text(text, "config t").unwrap(), preset);
        let over = resolve_text("extends = \"iql-hopper-medium\"\n[agent]\nexpectile = 0.9\n", "config t").unwrap();
        assert_eq!(over["agent"]["expectile"].as_float(), Some(0.9));
        assert_eq!(over["agent"]["beta"].as_float(), Some(3.0));
        let err = format!("{:#}", resolve_text("extends = \"no-such-base\"\n", "config t").unwrap_err());
        assert!(err.contains("config t: key `extends`: no preset or base is named `no-such-base`"), "{err}");
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
            let AgentConfig::Sac(sac) = &c.agent else { panic!("{name} is not SAC") };
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
            if let AgentConfig::Famo2oCql(f) = &c.agent {
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
            match &c.agent {
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

    /// The file of `config.toml` hashes: one line `<preset> <sha256>` per preset, the sha256 of
    /// the text a run of the preset writes to its run directory.
    fn config_hashes_fixture() -> std::path::PathBuf {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/presets-config-sha256.txt")
    }

    /// Every preset's resolved [`RunConfig`] writes exactly the `config.toml` it wrote when the
    /// fixture was made (before `[agent]` and the dataset options were typed, issue 48 item 4):
    /// how the config is held in memory may change, the text a run directory keeps (and `o2o
    /// resume` reads back) may not. `O2O_BLESS_PRESETS=1` rewrites the fixture, for an intended
    /// change only.
    #[test]
    fn every_preset_writes_the_config_toml_of_its_fixture() {
        use sha2::{Digest, Sha256};
        let mut texts = Vec::new();
        for name in names() {
            let text = resolved(name).to_toml_string().unwrap();
            let again = RunConfig::from_toml_str(&text, name).unwrap().to_toml_string().unwrap();
            assert_eq!(text, again, "{name}: config.toml read back and written again differs");
            texts.push((name, format!("{:x}", Sha256::digest(text.as_bytes())), text));
        }
        let lines: String = texts.iter().map(|(name, hash, _)| format!("{name} {hash}\n")).collect();
        let path = config_hashes_fixture();
        if std::env::var_os("O2O_BLESS_PRESETS").is_some() {
            std::fs::write(&path, &lines).unwrap();
        }
        let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let want: Vec<(&str, &str)> = want.lines().filter_map(|l| l.split_once(' ')).collect();
        let names: Vec<&str> = texts.iter().map(|t| t.0).collect();
        assert_eq!(names, want.iter().map(|w| w.0).collect::<Vec<_>>(), "the presets of {}", path.display());
        for ((name, hash, text), (_, expected)) in texts.iter().zip(&want) {
            assert_eq!(hash, expected, "preset {name} now writes this config.toml:\n{text}");
        }
    }

    /// A base is not a preset to run; asked for by name, it says which presets extend it. Every
    /// base is extended by some preset or base.
    #[test]
    fn bases_are_extended_not_run() {
        let err = load("calql-antmaze").unwrap_err().to_string();
        assert!(err.contains("is a base") && err.contains("calql-antmaze-umaze"), "{err}");
        let extends = |text: &str| text.parse::<toml::Table>().unwrap().get("extends").map(|v| v.to_string());
        for (base, _) in BASES {
            let quoted = format!("{base:?}");
            let used = PRESETS.iter().chain(BASES).any(|(_, t)| extends(t).as_deref() == Some(quoted.as_str()));
            assert!(used, "base {base} is extended by no preset or base");
        }
    }

    /// A file of one's own extends a preset: tables merge key by key, other values replace.
    #[test]
    fn a_file_extends_a_preset_key_by_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("mine.toml");
        std::fs::write(&file, "extends = \"sac-hopper\"\nseed = 3\n[train]\nonline_steps = 7\n").unwrap();
        let (name, mine) = load(file.to_str().unwrap()).unwrap();
        let (_, hopper) = load("sac-hopper").unwrap();
        assert_eq!(name, "mine");
        assert!(!mine.contains_key("extends"));
        assert_eq!(mine["seed"].as_integer(), Some(3));
        assert_eq!(mine["train"]["online_steps"].as_integer(), Some(7));
        assert_eq!(mine["train"]["batch_size"], hopper["train"]["batch_size"]);
        assert_eq!(mine["agent"], hopper["agent"]);
    }

    /// `extends` must name a preset or base, as a string, without a loop.
    #[test]
    fn bad_extends_fail_with_the_file_and_the_chain() {
        let files = |name: &str| -> Option<(String, &'static str)> {
            match name {
                "a" => Some(("base a".into(), "extends = \"b\"\n")),
                "b" => Some(("base b".into(), "extends = \"a\"\n")),
                _ => None,
            }
        };
        let err = resolve("extends = \"a\"", "mine.toml", &files).unwrap_err().to_string();
        assert!(err.contains("loop") && err.contains("mine.toml → base a → base b → base a"), "{err}");
        let err = resolve("extends = \"nope\"", "mine.toml", &files).unwrap_err().to_string();
        assert!(err.contains("mine.toml") && err.contains("`nope`"), "{err}");
        let err = resolve("extends = 3", "mine.toml", &files).unwrap_err().to_string();
        assert!(err.contains("mine.toml") && err.contains("extends"), "{err}");
    }

    #[test]
    fn unknown_preset_lists_the_known_ones() {
        let err = load("sac-hoper").unwrap_err().to_string();
        assert!(err.contains("sac-hopper") && err.contains("sac-hoper"), "{err}");
    }
}
