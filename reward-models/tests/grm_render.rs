//! GRM requests from MuJoCo renders (feature `render`, issue 22 item 6): the 8 images of a
//! query built from FetchPush-v4 camera frames, in the documented order.
//! `cargo test --release -p o2o-reward-models --features render --test grm_render`
#![cfg(feature = "render")]

use o2o_envs::Env;
use o2o_reward_models::grm::{GrmRequest, Views};

#[test]
fn a_grm_request_from_fetch_renders_has_the_documented_order() {
    let mut env = o2o_envs::registry::make_fetch("FetchPush-v4").unwrap();
    env.reset(Some(3)).unwrap();
    let mut r = env.inner().camera_renderer(64, 64).unwrap();
    let start = env.inner_mut().render_views(&mut r).unwrap();
    for _ in 0..5 {
        env.step(&[0.5, 0.5, 0.0, 0.0]).unwrap();
    }
    let before = env.inner_mut().render_views(&mut r).unwrap();
    env.step(&[0.5, 0.5, 0.0, 0.0]).unwrap();
    let after = env.inner_mut().render_views(&mut r).unwrap();
    // END: no goal image for a simulated push, so the last front frame (here: AFTER's).
    let q = GrmRequest::new(
        "push the block to the red target",
        Views::from_pngs(start.clone()).front,
        Views::from_pngs(after.clone()).front,
        Views::from_pngs(before.clone()),
        Views::from_pngs(after.clone()),
    );
    let order = [&start[0], &after[0], &before[0], &before[1], &before[2], &after[0], &after[1], &after[2]];
    for (i, (img, expected)) in q.images.iter().zip(order).enumerate() {
        assert_eq!(img.mime, "image/png", "image {i}");
        assert_eq!(&img.bytes, expected, "image {i} out of the documented order");
    }
    assert_ne!(before[0], after[0], "the front view changes as the arm moves");
}
