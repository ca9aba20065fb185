//! Offscreen renders of the Fetch cameras (feature `render`, issue 22 item 6): headless EGL
//! frames of the scene and gripper cameras, as the GRM client's views.
//! `cargo test --release -p o2o-envs --features render --test render`
#![cfg(feature = "render")]

use o2o_envs::mujoco::fetch::{FRONT_CAMERA, WRIST_CAMERA};
use o2o_envs::Env;

#[test]
fn fetch_cameras_render_headless_and_follow_the_arm() {
    let mut env = o2o_envs::registry::make_fetch("FetchPush-v4").unwrap();
    env.reset(Some(0)).unwrap();
    let mut r = env.inner().camera_renderer(96, 64).unwrap();
    assert_eq!(r.size(), (96, 64));
    let [front, left, right] = env.inner_mut().render_views(&mut r).unwrap();
    for png in [&front, &left, &right] {
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
        // IHDR: width and height, big-endian, at bytes 16..24.
        assert_eq!(
            (u32::from_be_bytes(png[16..20].try_into().unwrap()), u32::from_be_bytes(png[20..24].try_into().unwrap())),
            (96, 64)
        );
    }
    assert_eq!(left, right, "a single arm repeats its wrist view");
    assert_ne!(front, left, "scene and gripper cameras differ");
    // Frames are not blank, and the scene camera sees the arm move.
    let mut data = |env: &mut o2o_envs::wrappers::TimeLimit<o2o_envs::mujoco::FetchEnv>, cam: &str| {
        env.inner_mut().render_rgb(&mut r, cam).unwrap()
    };
    let before = data(&mut env, FRONT_CAMERA);
    let mean = before.iter().map(|v| *v as f64).sum::<f64>() / before.len() as f64;
    let var = before.iter().map(|v| (*v as f64 - mean).powi(2)).sum::<f64>() / before.len() as f64;
    assert!(var > 100.0, "a blank frame (variance {var})");
    for _ in 0..10 {
        env.step(&[1.0, 0.0, 1.0, 0.0]).unwrap();
    }
    let after = data(&mut env, FRONT_CAMERA);
    let changed = before.iter().zip(&after).filter(|(a, b)| a != b).count();
    assert!(changed > before.len() / 100, "{changed} of {} bytes changed after moving the arm", before.len());
    assert!(data(&mut env, WRIST_CAMERA).len() == 96 * 64 * 3);
}
