//! WSRL through the `o2o` binary (issue 7, item 6), on InvertedPendulum-v5 with small networks:
//!
//! 1. the warm-up collects exactly K env steps into the online buffer and makes no gradient
//!    update: the agent after "offline + warm-up" has the same weights, targets and optimizer
//!    moments as after "offline" alone;
//! 2. with offline ratio 0 no offline transition is sampled online: every online batch logs
//!    `offline_fraction = 0`, and the run works with the dataset file deleted, while a run that
//!    keeps offline data (ratio 0.5) logs half and fails without the file;
//! 3. a short WSRL run (pretrain → warm-up → fine-tune, one `o2o run`) improves on its offline
//!    start.
//! Restoring optimizer moments on load is tested on the agent itself (`agents/src/algos/wsrl.rs`).

use std::path::{Path, PathBuf};
use tch::Tensor;

mod common;

use common::{metric, pd_dataset};

fn data_dir() -> PathBuf {
    tempfile::Builder::new().prefix("o2o-wsrl-data-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep()
}

/// The demo preset moved to InvertedPendulum with 32×32 networks, plus `extra` overrides.
fn sets(data: &Path, extra: &[&str]) -> Vec<String> {
    let mut v = vec![
        "env=InvertedPendulum-v5".to_string(),
        format!("dataset.path={:?}", data.display().to_string()),
        "dataset.transitions=corrected".into(),
        "agent.critic.hidden=[32, 32]".into(),
        "agent.actor.mlp.hidden=[32, 32]".into(),
        "agent.cql_n_actions=4".into(),
        "eval.episodes=3".into(),
        "checkpoint.every=0".into(),
        "train.log_every=50".into(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn run(args: &[&str], sets: &[String]) -> PathBuf {
    common::run_o2o("o2o-wsrl-", args, sets)
}

fn summary(run: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap()
}

/// The final checkpoint's folder.
fn final_checkpoint(run: &Path) -> PathBuf {
    run.join(summary(run)["checkpoint"].as_str().unwrap())
}

fn agent_tensors(run: &Path) -> Vec<(String, Tensor)> {
    let mut v = Tensor::load_multi(final_checkpoint(run).join("agent.ot")).unwrap();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn warmup_collects_exactly_k_steps_and_updates_nothing() {
    let (data, _) = pd_dataset(&data_dir(), 2, 0.3);
    let offline_only = sets(&data, &["train.offline_steps=150", "train.warmup_steps=0", "train.online_steps=0"]);
    let with_warmup = sets(&data, &["train.offline_steps=150", "train.warmup_steps=300", "train.online_steps=0"]);
    let a = std::thread::spawn(move || run(&["run", "--preset", "wsrl-hopper-small", "--seed", "3"], &offline_only));
    let b = run(&["run", "--preset", "wsrl-hopper-small", "--seed", "3"], &with_warmup);
    let a = a.join().unwrap();
    let (sa, sb) = (summary(&a), summary(&b));
    assert_eq!((sa["grad_steps"].as_u64(), sa["env_steps"].as_u64()), (Some(150), Some(0)));
    assert_eq!(
        (sb["grad_steps"].as_u64(), sb["env_steps"].as_u64()),
        (Some(150), Some(300)),
        "K = 300 env steps, no update"
    );
    let replay = o2o_datasets::ReplayBuffer::load(&final_checkpoint(&b).join("replay.bin")).unwrap();
    assert_eq!(replay.len(), 300, "every warm-up step is in the online buffer");
    assert!(
        metric(&b, "train/critic_loss").len() == metric(&a, "train/critic_loss").len(),
        "no update logged during the warm-up"
    );
    // Same weights, targets, temperature and optimizer moments: only the agent's random
    // stream (which sampled the warm-up actions) has moved.
    let (ta, tb) = (agent_tensors(&a), agent_tensors(&b));
    assert_eq!(ta.len(), tb.len());
    let mut compared = 0;
    for ((na, xa), (nb, xb)) in ta.iter().zip(&tb) {
        assert_eq!(na, nb);
        if na == "meta/rng" {
            assert!(!xa.equal(xb), "the warm-up sampled actions from the agent's stream");
            continue;
        }
        assert!(xa.equal(xb), "{na} changed during the warm-up");
        compared += 1;
    }
    assert!(compared > 20, "{compared} tensors compared");
    // The frozen policy's evaluation at the end of the warm-up equals the one at the end of
    // pre-training.
    let phases = sb["phase_evals"].as_array().unwrap();
    let ret = |p: &str| phases.iter().find(|e| e["phase"] == p).unwrap()["eval"]["mean_return"].as_f64().unwrap();
    assert_eq!(ret("offline"), ret("warmup"));
}

#[test]
fn offline_ratio_zero_never_samples_offline_data() {
    let dir = data_dir();
    let (data, _) = pd_dataset(&dir, 2, 0.3);
    let parent = run(
        &["run", "--preset", "wsrl-hopper-small"],
        &sets(&data, &["train.offline_steps=100", "train.warmup_steps=0", "train.online_steps=0"]),
    );
    let online = ["train.warmup_steps=200", "train.online_steps=200", "train.online_batch_size=128", "eval.every=0"];
    let from = ["run", "--preset", "wsrl-hopper-small", "--from", parent.to_str().unwrap()];
    // Keeping offline data: half of every online batch comes from the dataset.
    let retain = run(&from, &sets(&data, &[&online[..], &["train.offline_ratio=0.5"]].concat()));
    let fr = metric(&retain, "train/offline_fraction");
    assert!(!fr.is_empty() && fr.iter().all(|&f| f == 0.5), "{fr:?}");
    // WSRL: with the dataset file gone, fine-tuning still runs, and no batch holds offline rows.
    std::fs::remove_file(&data).unwrap();
    let wsrl = run(&from, &sets(&data, &online));
    let fw = metric(&wsrl, "train/offline_fraction");
    assert_eq!(fw.len(), 4, "updates during online steps 50, 100, 150, 200: {fw:?}");
    assert!(fw.iter().all(|&f| f == 0.0), "{fw:?}");
    assert_eq!(summary(&wsrl)["env_steps"].as_u64(), Some(400));
    // ... whereas a run that retains offline data cannot start without it.
    let out = std::process::Command::new(common::O2O)
        .args(from)
        .args(["--device", "cpu", "--threads", "1", "--rerun=off", "--runs-dir"])
        .arg(dir.join("runs-missing"))
        .args(
            sets(&data, &[&online[..], &["train.offline_ratio=0.5"]].concat())
                .iter()
                .flat_map(|s| ["--set", s.as_str()]),
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("pd-2-0.3.hdf5"), "{err}");
}

#[test]
fn a_short_wsrl_run_improves_on_its_offline_start() {
    // A poor, noisy controller's data: offline training alone gives a mediocre policy.
    let (data, behaviour) = pd_dataset(&data_dir(), 20, 4.0);
    let s = sets(
        &data,
        &[
            "train.offline_steps=1000",
            "train.warmup_steps=500",
            "train.online_steps=2500",
            "train.online_batch_size=512",
            "eval.every=500",
            "eval.episodes=5",
            "agent.actor_lr=1e-3",
            "agent.critic_lr=1e-3",
            "agent.temperature_lr=1e-3",
        ],
    );
    // Four seeds: one short run's curve depends on when its seed "takes off" (any change to
    // the update's floating-point order moves that: with the AVX-512 products seeds 0 and 1
    // gained 118 and 128 and seeds 2-5 reached 1000), so the claim is about their mean, with
    // every seed above its offline start.
    let (mut gains, mut online_all, mut first) = (Vec::new(), Vec::new(), None);
    for seed in ["0", "1", "2", "3"] {
        let r = run(&["run", "--preset", "wsrl-hopper-small", "--seed", seed], &s);
        let phases = summary(&r)["phase_evals"].clone();
        let ret = |p: &str| {
            phases.as_array().unwrap().iter().find(|e| e["phase"] == p).unwrap()["eval"]["mean_return"]
                .as_f64()
                .unwrap()
        };
        let offline = ret("offline");
        let evals = metric(&r, "eval/return");
        println!("seed {seed}: behaviour data return {behaviour:.1}; WSRL: offline {offline:.1}, after warm-up {:.1}; all evaluations {evals:?}", ret("warmup"));
        // Evaluations: every 500 loop steps from the offline phase on, then at the two phase
        // ends; the online ones are those after the warm-up's.
        let online: Vec<f64> = evals[evals.len() - 5..].to_vec();
        gains.push(online.iter().sum::<f64>() / online.len() as f64 - offline);
        online_all.extend(online);
        first.get_or_insert(r);
    }
    let gain = gains.iter().sum::<f64>() / gains.len() as f64;
    assert!(gain >= 150.0, "mean return while fine-tuning is not above the offline start by 150 on average over seeds 0-3: gains {gains:?}");
    assert!(
        gains.iter().all(|&g| g >= 50.0),
        "a seed's mean return while fine-tuning is not above its offline start by 50: gains {gains:?}"
    );
    assert!(online_all.iter().any(|&r| r >= 900.0), "fine-tuning never reached 900: {online_all:?}");
    let r = first.expect("seed 0's run");
    // The diagnostics around the switch are there: Q against MC returns on online data, Q on
    // dataset actions, entropy, temperature.
    for key in ["diag/online/q", "diag/online/q_minus_mc", "diag/offline/q", "diag/online/entropy", "diag/online/alpha"]
    {
        assert!(metric(&r, key).len() >= 3, "{key}");
    }
}

/// `o2o experiment wsrl-ablation` end to end at a tiny budget on the shipped hopper data: the
/// preset pre-trains with CQL, so the `wsrl-*` and `no-retain-cql` variants start from a CQL
/// checkpoint and `calql-retain` from its own Cal-QL one; every variant's row, its Q − MC row and
/// its claim row are in the table, with the paired differences to `wsrl`.
#[test]
fn wsrl_ablation_runs_each_variant_from_its_own_pretraining() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out =
        tempfile::Builder::new().prefix("o2o-wsrl-ablation-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap().keep();
    let mut c = std::process::Command::new(common::O2O);
    c.current_dir(root)
        .args([
            "experiment",
            "wsrl-ablation",
            "--task",
            "hopper-medium",
            "--seeds",
            "1",
            "--jobs",
            "2",
            "--device",
            "cpu",
            "--out",
        ])
        .arg(&out);
    for s in [
        "train.offline_steps=20",
        "train.warmup_steps=300",
        "train.online_steps=600",
        "train.online_batch_size=128",
        "train.log_every=100",
        "eval.every=300",
        "eval.episodes=1",
        "diagnostics.every=300",
        "diagnostics.window=300",
        "diagnostics.dense_every=100",
        "checkpoint.every=0",
        "agent.critic.hidden=[16, 16]",
        "agent.actor.mlp.hidden=[16, 16]",
    ] {
        c.args(["--set", s]);
    }
    let o = c.output().unwrap();
    assert!(o.status.success(), "wsrl-ablation failed:\n{}", String::from_utf8_lossy(&o.stderr));
    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(
        table.contains("Pre-training: 20 CQL gradient steps")
            && table.contains("calql-retain starts from its own 20 Cal-QL gradient steps"),
        "{table}"
    );
    for v in ["wsrl", "wsrl-no-warmup", "no-retain-cql", "calql-retain", "rlpd"] {
        assert_eq!(
            table.matches(&format!("| {v} |")).count(),
            3,
            "{v} has a score row, a Q − MC row and a claim row:\n{table}"
        );
    }
    // The claim's paired rows: every other variant against wsrl, on four measures.
    assert_eq!(table.matches(" − wsrl |").count(), 16, "{table}");
    let config = |variant: &str| {
        let dir =
            std::fs::read_dir(out.join("runs").join(variant).join("seed-0")).unwrap().next().unwrap().unwrap().path();
        std::fs::read_to_string(dir.join("config.toml")).unwrap()
    };
    assert!(
        config("pretrain").contains("pretrain = \"cql\"") && config("pretrain-calql").contains("pretrain = \"calql\"")
    );
    assert!(
        config("wsrl-no-warmup").contains("pretrain = \"cql\"")
            && config("calql-retain").contains("pretrain = \"calql\"")
    );
    assert!(
        config("no-retain-cql").contains("online_conservative = true")
            && config("no-retain-cql").contains("warmup_steps = 0")
    );
    // RLPD gets the networks every other variant runs, `--set` overrides included.
    let rlpd: toml::Table = toml::from_str(&config("rlpd")).unwrap();
    let hidden = |net: &toml::Value| {
        net.get("hidden")
            .and_then(|h| h.as_array())
            .map(|h| h.iter().filter_map(|v| v.as_integer()).collect::<Vec<_>>())
    };
    assert_eq!(hidden(&rlpd["agent"]["critic"]), Some(vec![16, 16]), "{rlpd}");
    assert_eq!(hidden(&rlpd["agent"]["actor"]["mlp"]), Some(vec![16, 16]), "{rlpd}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["pretrain"], "cql");
    assert!(results["per_seed"]["early_dip"]["wsrl"]["0"].is_number(), "{}", results["per_seed"]);
    assert!(results["per_seed"]["dip_after_switch"]["wsrl"]["0"].is_number(), "{}", results["per_seed"]);
    assert_eq!(results["paired"].as_array().map(|p| p.len()), Some(16), "4 variants × 4 measures");
    let gaps = &results["q_minus_mc"];
    assert!(gaps["wsrl"][0].as_array().is_some_and(|g| !g.is_empty()), "wsrl logged Q against MC: {gaps}");
    // Without the warm-up the critic is updated from the first full online batch on, so its
    // Q − MC record diverges from the warm-started run's.
    assert_ne!(gaps["wsrl"][0], gaps["wsrl-no-warmup"][0], "the warm-up made no difference: {gaps}");
}

/// Cal-QL fine-tuning keeps the dataset and labels online rows with Monte-Carlo returns, so its
/// online buffer hands out finished episodes only. On HalfCheetah (1000-step episodes) the
/// diagnostics right after the switch come before any episode has ended: they must skip the
/// online record, not fail the run (`wsrl-ablation`'s `calql-retain` did).
#[test]
fn diagnostics_before_the_first_finished_episode_do_not_stop_a_calql_finetune() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let data = root.join("data/halfcheetah-small/halfcheetah-medium-v2.hdf5");
    let run = common::run_o2o(
        "o2o-calql-diag-",
        &["run", "--preset", "wsrl-halfcheetah-small"],
        &[
            format!("dataset.path={:?}", data.display().to_string()),
            "agent.pretrain=\"calql\"".into(),
            "agent.online_conservative=true".into(),
            "agent.online_critic_steps=1".into(),
            "agent.critic.hidden=[16, 16]".into(),
            "agent.actor.mlp.hidden=[16, 16]".into(),
            "train.offline_steps=10".into(),
            "train.warmup_steps=0".into(),
            "train.online_steps=300".into(),
            "train.offline_ratio=0.5".into(),
            "train.online_batch_size=64".into(),
            "eval.every=0".into(),
            "eval.at_phase_end=false".into(),
            "diagnostics.every=100".into(),
            "diagnostics.window=100".into(),
            "diagnostics.dense_every=50".into(),
            "checkpoint.every=0".into(),
        ],
    );
    assert!(metric(&run, "diag/online/q").is_empty(), "no episode finished, so no online record");
    assert!(!metric(&run, "diag/offline/q").is_empty(), "the dataset's record is still taken");
}
