//! MuJoCo geoms as Rerun shapes: the conventions that differ between the two, in one place.
//!
//! - Quaternions: MuJoCo stores `(w, x, y, z)`; Rerun's `Quaternion::from_xyzw` takes
//!   `(x, y, z, w)`.
//! - Capsules: a MuJoCo capsule is centred on its geom position, along its local z axis, with
//!   `size = [radius, half_length]`. A Rerun capsule starts at its translation and runs `length`
//!   along +z (one end-cap centre at the origin). So `length = 2·half_length` and
//!   `translation = pos − R(q)·(0, 0, half_length)`.
//! - Cylinders: both centred; MuJoCo `size = [radius, half_length]`, Rerun wants the full length.
//! - Boxes and ellipsoids: MuJoCo `size` already holds half-sizes (radii for an ellipsoid).
//! - Planes: MuJoCo `size = [half_x, half_y, grid]`, 0 meaning infinite; drawn as a thin box whose
//!   top face is the plane.
//!
//! Everything here is plain arithmetic on arrays so it can be checked without a recording.

/// Half-size used for an infinite MuJoCo plane (`size[0]` or `size[1]` = 0).
pub const INFINITE_PLANE_HALF: f64 = 20.0;
/// Thickness of the box drawn for a plane.
pub const PLANE_THICKNESS: f64 = 0.002;

/// MuJoCo geom types (`mjtGeom`) that o2o draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeomKind {
    /// An infinite plane (drawn as a finite floor).
    Plane,
    /// A sphere.
    Sphere,
    /// A capsule.
    Capsule,
    /// An ellipsoid.
    Ellipsoid,
    /// A cylinder.
    Cylinder,
    /// A box.
    Box,
    /// Height fields, meshes, SDFs: not drawn (the value is MuJoCo's type number).
    Unsupported(i32),
}

impl GeomKind {
    /// From MuJoCo's `mjtGeom` number (`mjGEOM_PLANE` = 0 … `mjGEOM_BOX` = 6).
    pub fn from_mjt(t: i32) -> Self {
        match t {
            0 => GeomKind::Plane,
            2 => GeomKind::Sphere,
            3 => GeomKind::Capsule,
            4 => GeomKind::Ellipsoid,
            5 => GeomKind::Cylinder,
            6 => GeomKind::Box,
            other => GeomKind::Unsupported(other),
        }
    }
}

/// One geom of a compiled MuJoCo model, in its body's frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Geom {
    /// The geom's type.
    pub kind: GeomKind,
    /// `geom_size`.
    pub size: [f64; 3],
    /// `geom_rgba`, each in 0..=1.
    pub rgba: [f32; 4],
    /// `geom_bodyid`.
    pub body: usize,
    /// `geom_pos`, in the body frame.
    pub pos: [f64; 3],
    /// `geom_quat`, MuJoCo order (w, x, y, z), in the body frame.
    pub quat_wxyz: [f64; 4],
}

/// The static geometry of a model: body names (index = body id, 0 = world) and geoms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelGeometry {
    /// Body names, by body index (0 is the world).
    pub body_names: Vec<String>,
    /// Every drawn geom.
    pub geoms: Vec<Geom>,
}

/// A body's world pose: `xpos` and `xquat` (MuJoCo order w, x, y, z).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pose {
    /// World position.
    pub pos: [f64; 3],
    /// World orientation, (w, x, y, z).
    pub quat_wxyz: [f64; 4],
}

/// A shape in Rerun's conventions, in the body frame. Quaternions are (x, y, z, w).
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)] // the fields are named for what they are
pub enum Shape {
    /// A box: centre, half sizes, orientation.
    Box { center: [f32; 3], half_size: [f32; 3], quat_xyzw: [f32; 4] },
    /// Starts at `start` and runs `length` along the rotated +z.
    Capsule { start: [f32; 3], length: f32, radius: f32, quat_xyzw: [f32; 4] },
    /// Centred on `center`, full `length` along the rotated +z.
    Cylinder { center: [f32; 3], length: f32, radius: f32, quat_xyzw: [f32; 4] },
    /// An ellipsoid: centre, semi-axes, orientation.
    Ellipsoid { center: [f32; 3], half_size: [f32; 3], quat_xyzw: [f32; 4] },
}

/// MuJoCo (w, x, y, z) → Rerun (x, y, z, w).
pub fn xyzw_from_wxyz(q: [f64; 4]) -> [f32; 4] {
    [q[1] as f32, q[2] as f32, q[3] as f32, q[0] as f32]
}

/// Rotate `v` by the unit quaternion `q` = (w, x, y, z): v' = v + 2w(u×v) + 2u×(u×v), u = (x, y, z).
pub fn rotate(q: [f64; 4], v: [f64; 3]) -> [f64; 3] {
    let (w, u) = (q[0], [q[1], q[2], q[3]]);
    let t = cross(u, v).map(|c| 2.0 * c);
    let ut = cross(u, t);
    [v[0] + w * t[0] + ut[0], v[1] + w * t[1] + ut[1], v[2] + w * t[2] + ut[2]]
}

fn cross(a: [f64; 3], b: [f64; 3]) -> [f64; 3] {
    [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
}

fn f32s(v: [f64; 3]) -> [f32; 3] {
    v.map(|x| x as f32)
}

/// Where a Rerun capsule must start so that it covers the centred MuJoCo capsule:
/// `pos − R(q)·(0, 0, half_length)`.
pub fn capsule_start(pos: [f64; 3], quat_wxyz: [f64; 4], half_length: f64) -> [f64; 3] {
    let axis = rotate(quat_wxyz, [0.0, 0.0, half_length]);
    [pos[0] - axis[0], pos[1] - axis[1], pos[2] - axis[2]]
}

/// The Rerun shape for `geom`, or `None` for a type o2o does not draw.
pub fn shape_of(geom: &Geom) -> Option<Shape> {
    let q = xyzw_from_wxyz(geom.quat_wxyz);
    let s = geom.size;
    Some(match geom.kind {
        GeomKind::Box => Shape::Box { center: f32s(geom.pos), half_size: f32s(s), quat_xyzw: q },
        GeomKind::Sphere => Shape::Ellipsoid { center: f32s(geom.pos), half_size: f32s([s[0]; 3]), quat_xyzw: q },
        GeomKind::Ellipsoid => Shape::Ellipsoid { center: f32s(geom.pos), half_size: f32s(s), quat_xyzw: q },
        GeomKind::Capsule => Shape::Capsule {
            start: f32s(capsule_start(geom.pos, geom.quat_wxyz, s[1])),
            length: (2.0 * s[1]) as f32,
            radius: s[0] as f32,
            quat_xyzw: q,
        },
        GeomKind::Cylinder => {
            Shape::Cylinder { center: f32s(geom.pos), length: (2.0 * s[1]) as f32, radius: s[0] as f32, quat_xyzw: q }
        }
        GeomKind::Plane => {
            let half = |h: f64| if h > 0.0 { h } else { INFINITE_PLANE_HALF };
            let down = rotate(geom.quat_wxyz, [0.0, 0.0, PLANE_THICKNESS / 2.0]);
            let center = [geom.pos[0] - down[0], geom.pos[1] - down[1], geom.pos[2] - down[2]];
            Shape::Box {
                center: f32s(center),
                half_size: f32s([half(s[0]), half(s[1]), PLANE_THICKNESS / 2.0]),
                quat_xyzw: q,
            }
        }
        GeomKind::Unsupported(_) => return None,
    })
}

/// An entity-path-safe body name: ASCII letters, digits, `_` and `-` kept, anything else `_`;
/// an empty name becomes `body<id>`.
pub fn entity_name(name: &str, id: usize) -> String {
    if name.is_empty() {
        return format!("body{id}");
    }
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f32], b: &[f32]) -> bool {
        a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
    }

    #[test]
    fn quaternion_order_moves_w_last() {
        assert_eq!(xyzw_from_wxyz([0.1, 0.2, 0.3, 0.4]), [0.2, 0.3, 0.4, 0.1]);
    }

    #[test]
    fn rotation_by_90_degrees_about_x_maps_z_to_minus_y() {
        let h = std::f64::consts::FRAC_1_SQRT_2;
        let r = rotate([h, h, 0.0, 0.0], [0.0, 0.0, 1.0]);
        assert!((r[0]).abs() < 1e-12 && (r[1] + 1.0).abs() < 1e-12 && r[2].abs() < 1e-12, "{r:?}");
    }

    #[test]
    fn upright_capsule_starts_half_a_length_below_its_centre() {
        let g = Geom {
            kind: GeomKind::Capsule,
            size: [0.05, 0.2, 0.0],
            rgba: [1.0; 4],
            body: 1,
            pos: [1.0, 2.0, 3.0],
            quat_wxyz: [1.0, 0.0, 0.0, 0.0],
        };
        let Some(Shape::Capsule { start, length, radius, quat_xyzw }) = shape_of(&g) else { panic!("not a capsule") };
        assert!(close(&start, &[1.0, 2.0, 2.8]));
        assert!((length - 0.4).abs() < 1e-6 && (radius - 0.05).abs() < 1e-6);
        assert_eq!(quat_xyzw, [0.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn capsule_along_x_starts_half_a_length_back_along_x() {
        // A capsule lying along +x: rotate z onto x, i.e. 90° about +y: q = (cos45°, 0, sin45°, 0).
        let h = std::f64::consts::FRAC_1_SQRT_2;
        let g = Geom {
            kind: GeomKind::Capsule,
            size: [0.046, 0.145, 0.0],
            rgba: [1.0; 4],
            body: 1,
            pos: [0.5, 0.0, 0.0],
            quat_wxyz: [h, 0.0, h, 0.0],
        };
        let Some(Shape::Capsule { start, length, quat_xyzw, .. }) = shape_of(&g) else { panic!("not a capsule") };
        assert!(close(&start, &[0.355, 0.0, 0.0]), "{start:?}");
        assert!((length - 0.29).abs() < 1e-6);
        assert!(close(&quat_xyzw, &[0.0, h as f32, 0.0, h as f32]));
    }

    #[test]
    fn sphere_box_cylinder_and_plane_sizes() {
        let base = Geom {
            kind: GeomKind::Sphere,
            size: [0.3, 0.0, 0.0],
            rgba: [1.0; 4],
            body: 0,
            pos: [0.0; 3],
            quat_wxyz: [1.0, 0.0, 0.0, 0.0],
        };
        assert!(
            matches!(shape_of(&base), Some(Shape::Ellipsoid { half_size, .. }) if close(&half_size, &[0.3, 0.3, 0.3]))
        );
        let bx = Geom { kind: GeomKind::Box, size: [0.1, 0.2, 0.3], ..base.clone() };
        assert!(matches!(shape_of(&bx), Some(Shape::Box { half_size, .. }) if close(&half_size, &[0.1, 0.2, 0.3])));
        let cy = Geom { kind: GeomKind::Cylinder, size: [0.1, 0.25, 0.0], pos: [0.0, 0.0, 1.0], ..base.clone() };
        assert!(matches!(shape_of(&cy), Some(Shape::Cylinder { center, length, radius, .. })
            if close(&center, &[0.0, 0.0, 1.0]) && (length - 0.5).abs() < 1e-6 && (radius - 0.1).abs() < 1e-6));
        let plane = Geom { kind: GeomKind::Plane, size: [0.0, 5.0, 1.0], ..base.clone() };
        let Some(Shape::Box { center, half_size, .. }) = shape_of(&plane) else { panic!("plane is a box") };
        assert!(close(&half_size, &[20.0, 5.0, 0.001]));
        assert!(close(&center, &[0.0, 0.0, -0.001])); // the top face is the plane z = 0
        assert_eq!(shape_of(&Geom { kind: GeomKind::from_mjt(7), ..base }), None);
    }

    #[test]
    fn entity_names_are_path_safe() {
        assert_eq!(entity_name("torso", 1), "torso");
        assert_eq!(entity_name("left leg/1", 3), "left_leg_1");
        assert_eq!(entity_name("", 4), "body4");
    }
}
