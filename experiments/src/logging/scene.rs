//! From a MuJoCo task (`o2o_envs::mujoco::MujocoEnv`) to what the episode logger draws: the
//! static geoms and the bodies' current world poses.

use super::shapes::{Geom, GeomKind, ModelGeometry, Pose};
use o2o_envs::mujoco::{GeomInfo, GeomKind as EnvKind, MujocoEnv};

fn kind(k: EnvKind) -> GeomKind {
    match k {
        EnvKind::Plane => GeomKind::Plane,
        EnvKind::Sphere => GeomKind::Sphere,
        EnvKind::Capsule => GeomKind::Capsule,
        EnvKind::Ellipsoid => GeomKind::Ellipsoid,
        EnvKind::Cylinder => GeomKind::Cylinder,
        EnvKind::Box => GeomKind::Box,
        // mjtGeom numbers, for the record only: these are not drawn.
        EnvKind::HField => GeomKind::Unsupported(1),
        EnvKind::Mesh => GeomKind::Unsupported(7),
        EnvKind::Sdf => GeomKind::Unsupported(8),
    }
}

/// One geom as the logger's [`Geom`].
pub fn geom(g: &GeomInfo) -> Geom {
    Geom { kind: kind(g.kind), size: g.size, rgba: g.rgba, body: g.body_id, pos: g.pos, quat_wxyz: g.quat }
}

/// The model's body names and geoms.
pub fn model_geometry(env: &MujocoEnv) -> ModelGeometry {
    ModelGeometry { body_names: env.body_names(), geoms: env.geoms().iter().map(geom).collect() }
}

/// Every body's current world pose (index = body id).
pub fn body_poses(env: &MujocoEnv) -> Vec<Pose> {
    env.body_poses().into_iter().map(|(pos, quat_wxyz)| Pose { pos, quat_wxyz }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logging::shapes::{shape_of, Shape};
    use o2o_envs::Env;

    /// Hopper's thigh capsule is centred 0.225 below the thigh body with half-length 0.225; the
    /// Rerun capsule must start at its bottom end (the knee), z = 1.25 − 0.2 − 0.45 = 0.6 at reset.
    #[test]
    fn hopper_geometry_and_poses_line_up() {
        let mut env = o2o_envs::make_unwrapped("Hopper-v5").unwrap();
        env.reset(Some(0)).unwrap();
        let g = model_geometry(&env);
        assert_eq!(g.body_names[0], "world");
        assert!(g.body_names.iter().any(|n| n == "thigh"), "{:?}", g.body_names);
        let thigh = g.body_names.iter().position(|n| n == "thigh").unwrap();
        let capsule = g.geoms.iter().find(|x| x.body == thigh && x.kind == GeomKind::Capsule).expect("thigh capsule");
        let poses = body_poses(&env);
        assert_eq!(poses.len(), g.body_names.len());
        let Some(Shape::Capsule { start, length, .. }) = shape_of(capsule) else { panic!("capsule expected") };
        assert!((length - 0.45).abs() < 1e-5, "{length}");
        let p = poses[thigh];
        let world = crate::logging::shapes::rotate(p.quat_wxyz, start.map(|x| x as f64));
        let z = p.pos[2] + world[2];
        assert!((z - 0.6).abs() < 0.02, "thigh capsule starts at z = {z}, expected ≈ 0.6");
    }
}
