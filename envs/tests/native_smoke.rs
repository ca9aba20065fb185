//! Smoke test of the native MuJoCo install: load Gymnasium's half_cheetah.xml and step it.
//! A broken install (missing libmujoco, missing assets) fails here, loudly.

use mujoco_rs::prelude::*;

#[test]
fn mujoco_loads_gymnasium_half_cheetah_and_steps() {
    assert_eq!(o2o_envs::mujoco_version(), "3.17.0");
    let path =
        o2o_envs::assets::asset_path("half_cheetah.xml").expect("Gymnasium assets must be installed by `make setup`");
    let model = MjModel::from_xml(&path).expect("half_cheetah.xml must load in MuJoCo 3.17");
    assert_eq!((model.ffi().nq, model.ffi().nv, model.ffi().nu), (9, 9, 6));
    let mut data = MjData::new(&model);
    data.ctrl_mut().copy_from_slice(&[1.0; 6]);
    for _ in 0..100 {
        data.step();
    }
    let dt = model.opt().timestep;
    assert!((data.time() - 100.0 * dt).abs() < 1e-9, "time {} after 100 steps of {dt}", data.time());
    assert!(data.qpos().iter().all(|q| q.is_finite()));
    assert!(data.qpos().iter().any(|q| q.abs() > 1e-6), "full torque for 100 steps must move the cheetah");
}
