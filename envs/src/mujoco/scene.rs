//! What a viewer needs to draw a MuJoCo task: the static geom list (type, size, colour, body,
//! pose in the body frame) and the current world pose of every body.
//!
//! Conventions are MuJoCo's: sizes as in `geom_size` (sphere: radius; capsule/cylinder: radius,
//! half-length; box: half-sizes; plane: half-x, half-y, grid spacing), quaternions `wxyz`.

use super::MujocoEnv;
use mujoco_rs::prelude::MjtGeomBase as G;
use mujoco_rs::prelude::*;

/// A MuJoCo geom type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeomKind {
    /// Infinite plane (drawn finite with `size[0..2]` half-extents; 0 means infinite).
    Plane,
    /// Height field.
    HField,
    /// Sphere of radius `size[0]`.
    Sphere,
    /// Capsule of radius `size[0]` and half-length `size[1]` along the geom's z axis.
    Capsule,
    /// Ellipsoid with semi-axes `size`.
    Ellipsoid,
    /// Cylinder of radius `size[0]` and half-length `size[1]` along z.
    Cylinder,
    /// Box with half-sizes `size`.
    Box,
    /// Triangle mesh.
    Mesh,
    /// Signed distance field.
    Sdf,
}

/// One geom of the model, in its body's frame.
#[derive(Debug, Clone, PartialEq)]
pub struct GeomInfo {
    /// The geom's name, if the XML gives one.
    pub name: Option<String>,
    /// Shape type.
    pub kind: GeomKind,
    /// MuJoCo `geom_size`.
    pub size: [f64; 3],
    /// Colour: the material's rgba when the geom has a material, else `geom_rgba`.
    pub rgba: [f32; 4],
    /// Index of the body the geom is attached to (0 is the world).
    pub body_id: usize,
    /// Position in the body frame.
    pub pos: [f64; 3],
    /// Orientation in the body frame, `wxyz`.
    pub quat: [f64; 4],
}

fn kind_of(t: G) -> GeomKind {
    match t {
        G::mjGEOM_PLANE => GeomKind::Plane,
        G::mjGEOM_HFIELD => GeomKind::HField,
        G::mjGEOM_SPHERE => GeomKind::Sphere,
        G::mjGEOM_CAPSULE => GeomKind::Capsule,
        G::mjGEOM_ELLIPSOID => GeomKind::Ellipsoid,
        G::mjGEOM_CYLINDER => GeomKind::Cylinder,
        G::mjGEOM_BOX => GeomKind::Box,
        G::mjGEOM_MESH => GeomKind::Mesh,
        G::mjGEOM_SDF => GeomKind::Sdf,
    }
}

/// A named task point in world coordinates ([`super::Task::markers`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// What it is: `goal`, `ant`, `palm`, `fftip`, `object`, `target`, ….
    pub name: &'static str,
    /// World position.
    pub pos: [f64; 3],
    /// Whether a viewer draws its path over the episode (the ant, the object).
    pub trail: bool,
}

impl MujocoEnv {
    /// The task's markers in the current state ([`super::Task::markers`]).
    pub fn markers(&self) -> Vec<Marker> {
        self.task().markers(self.data())
    }

    /// Every geom of the model, in model order.
    pub fn geoms(&self) -> Vec<GeomInfo> {
        let m = self.model();
        let (types, sizes, rgbas, bodies) = (m.geom_type(), m.geom_size(), m.geom_rgba(), m.geom_bodyid());
        let (pos, quat, matid, mat_rgba) = (m.geom_pos(), m.geom_quat(), m.geom_matid(), m.mat_rgba());
        (0..types.len())
            .map(|i| GeomInfo {
                name: m.id_to_name(MjtObjBase::mjOBJ_GEOM, i).map(str::to_string),
                kind: kind_of(types[i]),
                size: sizes[i],
                rgba: usize::try_from(matid[i]).ok().and_then(|j| mat_rgba.get(j).copied()).unwrap_or(rgbas[i]),
                body_id: bodies[i] as usize,
                pos: pos[i],
                quat: quat[i],
            })
            .collect()
    }

    /// Body names in model order (`world` first); unnamed bodies get `body<i>`.
    pub fn body_names(&self) -> Vec<String> {
        let m = self.model();
        (0..m.ffi().nbody as usize)
            .map(|i| m.id_to_name(MjtObjBase::mjOBJ_BODY, i).map(str::to_string).unwrap_or_else(|| format!("body{i}")))
            .collect()
    }

    /// The current world pose of every body: (`xpos`, `xquat` in `wxyz`), body 0 the world.
    pub fn body_poses(&self) -> Vec<([f64; 3], [f64; 4])> {
        let d = self.data();
        d.xpos().iter().copied().zip(d.xquat().iter().copied()).collect()
    }
}
