//! Scripted FetchPush demonstrations → D4RL file + keyframe sidecar → progress model: the
//! recording round-trips through HDF5, its keyframes are ordered sub-task boundaries, and a
//! model trained on 8 demos orders the frames of 3 held-out demos.

use o2o_datasets::d4rl::D4rlDataset;
use o2o_envs::mujoco::FetchTask;
use o2o_envs::registry::make_fetch;
use o2o_reward_models::demos::{demos_from_dataset, record_fetch, Keyframes};
use o2o_reward_models::labels::LabelConfig;
use o2o_reward_models::{voc, Fusion, ProgressModel, ProgressModelConfig, ViewSpec};
use tch::Device;

#[test]
fn scripted_push_demos_train_a_progress_model() {
    tch::set_num_threads(1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("push.hdf5");
    let mut env = make_fetch("FetchPush-v4").unwrap();
    let (data, keyframes, report) = record_fetch(&mut env, FetchTask::Push, 24, 0, &path).unwrap();
    assert_eq!(report.kept, 24, "{report:?}");
    assert!(report.attempted <= 32, "few attempts fail or skip a stage: {report:?}");
    data.write(&path).unwrap();
    let side = Keyframes::sidecar_of(&path);
    keyframes.write(&side).unwrap();

    let back = D4rlDataset::read(&path).unwrap();
    assert_eq!(back.len(), 24 * 50);
    assert_eq!(back.episodes(None).len(), 24);
    let kf = Keyframes::read(&side).unwrap();
    assert_eq!(kf, keyframes);
    for ep in &kf.episodes {
        let names: Vec<&str> = ep.subtasks.iter().map(|t| t.annotation.as_deref().unwrap()).collect();
        assert_eq!(names, ["approach", "contact", "carry"]);
        for w in ep.subtasks.windows(2) {
            assert_eq!(w[0].end_frame_id, w[1].start_frame_id);
        }
        assert!(ep.subtasks.iter().all(|t| t.end_frame_id > t.start_frame_id && t.end_frame_id < 50));
    }

    // Views: gripper (grip pos + fingers), object (pos), goal (desired goal).
    let views = vec![
        ViewSpec { name: "goal".into(), dim: 3, obs_slice: Some([3, 6]), minus: None },
        ViewSpec { name: "gripper".into(), dim: 3, obs_slice: Some([6, 9]), minus: None },
        ViewSpec { name: "object".into(), dim: 3, obs_slice: Some([9, 12]), minus: None },
        ViewSpec { name: "object-from-gripper".into(), dim: 3, obs_slice: Some([12, 15]), minus: None },
    ];
    let demos = demos_from_dataset(&back, Some(&kf), &views).unwrap();
    let (train, held) = demos.split_at(20);
    let config = ProgressModelConfig {
        views,
        hidden: vec![64, 64],
        steps: 800,
        batch_size: 128,
        lr: 1e-3,
        labels: LabelConfig { sample_factor: 2, pairs_per_episode: 400, ..Default::default() },
        ..Default::default()
    };
    let (model, r) = ProgressModel::train(config, train, Device::Cpu).unwrap();
    let modes = [Fusion::Incremental, Fusion::Forward, Fusion::Backward, Fusion::Mean, Fusion::Weighted];
    let mut mean_voc = [0.0; 5];
    for d in held {
        // Up to the first success frame: after it the demo holds still at progress 1.
        let end = d.keyframes.as_ref().unwrap().last().unwrap().end_frame_id + 1;
        let curve = model.progress_curve(&d.features[..end * 12], None).unwrap();
        for (m, f) in modes.iter().enumerate() {
            mean_voc[m] += voc(&curve.iter().map(|e| e.get(*f)).collect::<Vec<_>>()) / held.len() as f64;
        }
    }
    eprintln!("FetchPush progress model: final hop MSE {:.4}; held-out VOC incremental {:.3}, forward {:.3}, backward {:.3}, mean {:.3}, weighted {:.3}", r.final_loss, mean_voc[0], mean_voc[1], mean_voc[2], mean_voc[3], mean_voc[4]);
    assert!(r.final_loss < 0.02, "hop MSE {}", r.final_loss);
    // From 20 demos the single modes generalize unevenly; the consistency-weighted estimate,
    // which moves only where the anchors agree, orders the held-out frames.
    assert!(mean_voc[4] > 0.85, "weighted held-out VOC {}", mean_voc[4]);
}
