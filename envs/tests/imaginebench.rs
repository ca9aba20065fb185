//! ImagineBench Mujoco-v0 tasks on our HalfCheetah: the 18 + 768 observation (absolute x at
//! reset, Δx after), round-robin tasks with their sentences' vectors, success terminations,
//! the 200-step limit, and the released jump-instruction pairing.

use o2o_envs::imaginebench::{
    builtin_embedding, ImagineBenchEnv, ImagineBenchOptions, Instructions, Level, TaskKind, EMBED_DIM,
};
use o2o_envs::{make, Env};

fn env(level: Level, instructions: Instructions) -> ImagineBenchEnv {
    ImagineBenchEnv::new(ImagineBenchOptions { level: Some(level), instructions, ..Default::default() }).unwrap()
}

#[test]
fn observation_is_absolute_x_at_reset_then_delta_x() {
    let mut e = env(Level::Real, Instructions::Fixed);
    let obs = e.reset(Some(4)).unwrap();
    assert_eq!(obs.len(), 18 + EMBED_DIM);
    let x0 = e.physics().qpos()[0];
    assert!(x0 != 0.0 && x0.abs() < 0.1, "reset noise U(−0.1, 0.1) on x: {x0}");
    assert_eq!(obs[0], x0 as f32, "first number at reset = absolute x");
    assert_eq!(&obs[1..18], &e.physics().observation_f64().iter().map(|v| *v as f32).collect::<Vec<_>>()[..]);
    let mut x_before = x0;
    for k in 0..3 {
        let s = e.step(&[0.5, -0.3, 0.2, 0.9, -1.0, 0.1]).unwrap();
        let x = e.physics().qpos()[0];
        assert_eq!(s.obs[0], (x - x_before) as f32, "step {k}: first number = Δx since the previous step");
        assert_eq!(s.info.get("x_delta"), Some(x - x_before));
        x_before = x;
    }
    assert!((e.history().sum - (x_before - x0)).abs() < 1e-12, "S = x_t − x_0");
}

#[test]
fn resets_cycle_tasks_and_append_the_sentence_vector() {
    let mut e = env(Level::Hard, Instructions::Fixed);
    let mut seen = Vec::new();
    for k in 0..6 {
        let obs = e.reset(Some(k)).unwrap();
        seen.push(e.task());
        let sentence = e.instruction();
        assert!(e.task().instructions(Instructions::Fixed).contains(&sentence));
        assert_eq!(&obs[18..], &builtin_embedding(sentence, EMBED_DIM)[..]);
        let s = e.step(&[0.0; 6]).unwrap();
        assert_eq!(&s.obs[18..], &obs[18..], "the vector stays for the whole episode");
        assert_eq!(s.info.task, Some(e.task().key()));
    }
    use TaskKind::*;
    assert_eq!(
        seen,
        [MoveForwardBackward, MoveBackwardForward, JumpInPlace, MoveForwardBackward, MoveBackwardForward, JumpInPlace]
    );
    // Ten paraphrases, drawn from the env's seeded stream: a seed gives the same sentence.
    let mut a = env(Level::Real, Instructions::Fixed);
    let mut b = env(Level::Real, Instructions::Fixed);
    let draws = |e: &mut ImagineBenchEnv| {
        (0..8)
            .map(|k| {
                e.reset(Some(100 + k)).unwrap();
                e.instruction()
            })
            .collect::<Vec<_>>()
    };
    let (da, db) = (draws(&mut a), draws(&mut b));
    assert_eq!(da, db);
    assert!(da.iter().collect::<std::collections::HashSet<_>>().len() > 2, "{da:?}");
}

#[test]
fn released_option_shows_jump_forward_the_backward_sentences() {
    let mut fixed = env(Level::Real, Instructions::Fixed);
    let mut released = env(Level::Real, Instructions::Released);
    for k in 0..2 {
        fixed.reset(Some(k)).unwrap();
        released.reset(Some(k)).unwrap();
        assert_eq!(fixed.task(), released.task());
        let (f, r) = (fixed.instruction(), released.instruction());
        match fixed.task() {
            TaskKind::JumpForward => assert!(f.contains("forward") || f.contains("ahead"), "{f}"),
            TaskKind::JumpBackward => assert!(f.contains("back"), "{f}"),
            t => panic!("{t:?}"),
        }
        // Same seed, same draw index, the other jump task's sentence list.
        let other = if fixed.task() == TaskKind::JumpForward { TaskKind::JumpBackward } else { TaskKind::JumpForward };
        let i = fixed.task().instructions(Instructions::Fixed).iter().position(|s| *s == f).unwrap();
        assert_eq!(r, other.instructions(Instructions::Fixed)[i]);
        assert_ne!(released.observation_space().dim(), 0);
    }
}

#[test]
fn success_terminates_and_the_limit_truncates_at_200() {
    // jump-forward (first task): a forward-running gait reaches S > 0 by t = 5 and terminates.
    let mut e = make("imaginebench-mujoco-real-v0").unwrap();
    assert_eq!(e.spec().max_episode_steps, Some(200));
    e.reset(Some(0)).unwrap();
    let mut t = 0;
    let end = loop {
        // A constant push: the cheetah slides; whether S > 0 depends on the pose, so keep
        // stepping until the rule fires or the limit comes.
        let s = e.step(&[1.0, 1.0, 1.0, -1.0, -1.0, -1.0]).unwrap();
        t += 1;
        if s.done() {
            break s;
        }
    };
    if end.terminated {
        assert!(
            t >= 5 && end.info.success == Some(true) && end.info.get("x_travelled").unwrap() > 0.0,
            "t = {t}: {:?}",
            end.info
        );
    } else {
        assert_eq!(t, 200);
    }
    // jump-in-place needs |S| < 1.05 at t ≥ 15: zero actions barely move, so it succeeds at 15.
    let mut hard = make("imaginebench-mujoco-hard-v0").unwrap();
    for _ in 0..3 {
        hard.reset(Some(1)).unwrap();
    }
    let mut t = 0;
    loop {
        let s = hard.step(&[0.0; 6]).unwrap();
        t += 1;
        if s.done() {
            assert!(s.terminated && s.info.success == Some(true), "{:?}", s.info);
            assert_eq!(s.info.task, Some("hard/jump-in-place"));
            break;
        }
    }
    assert_eq!(t, 15);
    // move-forward-backward with zero actions never succeeds: truncated at 200, not terminated.
    let mut e = make("imaginebench-mujoco-hard-v0").unwrap();
    e.reset(Some(2)).unwrap();
    let mut t = 0;
    loop {
        let s = e.step(&[0.0; 6]).unwrap();
        t += 1;
        if s.done() {
            assert!(s.truncated && !s.terminated && s.info.success == Some(false));
            break;
        }
    }
    assert_eq!(t, 200);
}
