//! LeRobot's motor calibration files, shared by the servo-bus drivers ([`crate::feetech`] for
//! SO-100/101, [`crate::dynamixel`] for Koch): LeRobot writes one JSON object per arm, the same
//! layout for its Feetech and Dynamixel buses —
//! `{"shoulder_pan": {"id": 1, "drive_mode": 0, "homing_offset": …, "range_min": …,
//! "range_max": …}, …}`.
//!
//! Units: ticks `t` in 0..4096 per turn (STS3215 and X-series alike). A joint angle is
//! q = (t − mid) · 2π / 4096 with mid = (range_min + range_max) / 2, negated when `drive_mode`
//! is 1 (LeRobot applies the drive mode in software the same way, mirroring about the middle of
//! the range); a target is clamped into [range_min, range_max] before it is sent, a second line
//! of defence behind the envelope.

use crate::driver::{Capabilities, ControlMode, DriverError, PhysicalLimits};
use std::path::Path;

/// Ticks per turn of the servos LeRobot's arms use.
pub const TICKS_PER_TURN: f64 = 4096.0;

/// One motor's calibration, as LeRobot writes it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MotorCalibration {
    /// Bus id.
    pub id: u8,
    /// 1: the joint turns the other way.
    #[serde(default)]
    pub drive_mode: u8,
    /// Offset LeRobot's calibration writes to the servo (Feetech: kept for the record;
    /// Dynamixel: checked against the servo's Homing Offset register at connect).
    #[serde(default)]
    pub homing_offset: i32,
    /// Lowest allowed position (ticks).
    pub range_min: u16,
    /// Highest allowed position (ticks).
    pub range_max: u16,
}

impl MotorCalibration {
    fn mid(&self) -> f64 {
        (f64::from(self.range_min) + f64::from(self.range_max)) / 2.0
    }

    /// −1 when the joint turns the other way, else 1.
    pub fn sign(&self) -> f64 {
        if self.drive_mode == 1 {
            -1.0
        } else {
            1.0
        }
    }

    /// Ticks → radians.
    pub fn to_rad(&self, ticks: u16) -> f64 {
        self.ticks_to_rad(f64::from(ticks))
    }

    /// Ticks (any integer reading, e.g. a Dynamixel's signed 32-bit position) → radians.
    pub fn ticks_to_rad(&self, ticks: f64) -> f64 {
        self.sign() * (ticks - self.mid()) * std::f64::consts::TAU / TICKS_PER_TURN
    }

    /// Radians → ticks, clamped into the calibrated range.
    pub fn to_ticks(&self, rad: f64) -> u16 {
        let t = self.mid() + self.sign() * rad * TICKS_PER_TURN / std::f64::consts::TAU;
        t.round().clamp(f64::from(self.range_min), f64::from(self.range_max)) as u16
    }
}

/// Read LeRobot's calibration file: motors by ascending bus id.
pub fn read_calibration(path: &Path) -> Result<Vec<(String, MotorCalibration)>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read the calibration {}: {e}", path.display()))?;
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&text).map_err(|e| format!("{}: not a LeRobot calibration file: {e}", path.display()))?;
    map.into_iter()
        .map(|(name, v)| {
            let c: MotorCalibration = serde_json::from_value(v).map_err(|e| {
                format!(
                    "{}: motor {name}: {e} (expected id, drive_mode, homing_offset, range_min, range_max)",
                    path.display()
                )
            })?;
            if c.range_min >= c.range_max || c.range_max > 4095 {
                return Err(format!(
                    "{}: motor {name}: range_min {} / range_max {}: expected range_min < range_max <= 4095",
                    path.display(),
                    c.range_min,
                    c.range_max
                ));
            }
            Ok((name, c))
        })
        .collect::<Result<Vec<_>, String>>()
        .map(|mut v| {
            v.sort_by_key(|(_, c)| c.id);
            v
        })
}

/// The motors of an arm in joint order: `motors` (names from the config), or when it is empty
/// every motor of the calibration by ascending id. `key` names the config key in errors.
pub fn select_motors(
    calibration: &Path,
    motors: &[String],
    key: &str,
) -> Result<(Vec<String>, Vec<MotorCalibration>), String> {
    let by_id = read_calibration(calibration)?;
    let names: Vec<String> =
        if motors.is_empty() { by_id.iter().map(|(n, _)| n.clone()).collect() } else { motors.to_vec() };
    let cal: std::collections::BTreeMap<String, MotorCalibration> = by_id.into_iter().collect();
    let chosen = names
        .iter()
        .map(|n| cal.get(n).cloned().ok_or_else(|| format!("{key}: `{n}` is not in {}", calibration.display())))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((names, chosen))
}

/// What a servo-bus driver knows of its arm before connecting: capabilities (joint names in
/// order), each joint's calibration, and the home pose (rad).
pub struct ServoArm {
    /// Name, joints, joint-position mode.
    pub caps: Capabilities,
    /// Calibration per joint.
    pub motors: Vec<MotorCalibration>,
    /// Home pose per joint (rad; 0 is the middle of each range).
    pub home: Vec<f64>,
    /// The calibration file, named in the limits it gives.
    pub calibration: std::path::PathBuf,
}

impl ServoArm {
    /// The arm of a servo-bus config: the port must exist (checked first, so a missing adapter
    /// is the error a user sees first), then the calibration is read and `motors` selected
    /// from it, and `home` (empty: all 0) must have one entry per joint.
    pub fn load(
        driver: &str,
        port: &Path,
        calibration: &Path,
        motors: &[String],
        home: &[f64],
    ) -> Result<Self, DriverError> {
        let unsupported = |message: String| DriverError::Unsupported { driver: driver.into(), message };
        crate::serial::require_port(driver, port)?;
        let (names, motors) = select_motors(calibration, motors, "driver.motors").map_err(unsupported)?;
        if !home.is_empty() && home.len() != motors.len() {
            return Err(unsupported(format!(
                "driver.home: expected {} joint positions, found {}",
                motors.len(),
                home.len()
            )));
        }
        let home = if home.is_empty() { vec![0.0; motors.len()] } else { home.to_vec() };
        let caps = Capabilities {
            name: format!("{driver} {}", port.display()),
            joints: names,
            modes: vec![ControlMode::JointPosition],
            has_end_effector: false,
        };
        Ok(Self { caps, motors, home, calibration: calibration.to_path_buf() })
    }

    /// The arm's physical limits: each joint's range from its calibrated `[range_min,
    /// range_max]` in radians, and the servos' top speed `joint_speed` (rad/s) when known.
    pub fn limits(&self, joint_speed: Option<f64>) -> PhysicalLimits {
        let joint_range = self
            .motors
            .iter()
            .map(|m| {
                let (a, b) = (m.to_rad(m.range_min), m.to_rad(m.range_max));
                [a.min(b), a.max(b)]
            })
            .collect();
        PhysicalLimits {
            source: format!("the calibration {}", self.calibration.display()),
            joint_range,
            joint_speed,
            ..PhysicalLimits::default()
        }
    }

    /// Joint targets (rad) → goal ticks, each clamped into its calibrated range.
    pub fn ticks(&self, q: &[f64]) -> Vec<u16> {
        self.motors.iter().zip(q).map(|(m, q)| m.to_ticks(*q)).collect()
    }

    /// The servos' ids, in joint order.
    pub fn ids(&self) -> Vec<u8> {
        self.motors.iter().map(|m| m.id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_maps_ticks_to_radians_inside_the_range() {
        let c = MotorCalibration { id: 1, drive_mode: 0, homing_offset: 0, range_min: 1000, range_max: 3000 };
        assert_eq!(c.to_rad(2000), 0.0);
        assert!((c.to_rad(3024) - std::f64::consts::FRAC_PI_2).abs() < 0.05);
        assert_eq!(c.to_ticks(0.0), 2000);
        assert_eq!(c.to_ticks(100.0), 3000, "clamped into the range");
        let r = MotorCalibration { drive_mode: 1, ..c };
        assert_eq!(r.to_ticks(0.1), 2000 - 65);
    }

    #[test]
    fn calibration_files_are_checked_and_motors_selected_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("arm.json");
        std::fs::write(&p, r#"{"b": {"id": 2, "range_min": 10, "range_max": 20}, "a": {"id": 1, "drive_mode": 1, "homing_offset": -3, "range_min": 0, "range_max": 4095}}"#).unwrap();
        let (names, cal) = select_motors(&p, &[], "driver.motors").unwrap();
        assert_eq!(names, ["a", "b"], "by ascending id");
        assert_eq!((cal[0].id, cal[0].drive_mode, cal[0].homing_offset), (1, 1, -3));
        let (names, _) = select_motors(&p, &["b".into()], "driver.motors").unwrap();
        assert_eq!(names, ["b"]);
        let e = select_motors(&p, &["c".into()], "driver.motors").unwrap_err();
        assert!(e.contains("driver.motors") && e.contains("`c`"), "{e}");
        std::fs::write(&p, r#"{"a": {"id": 1, "range_min": 30, "range_max": 20}}"#).unwrap();
        let e = read_calibration(&p).unwrap_err();
        assert!(e.contains("motor a") && e.contains("range_min 30"), "{e}");
        std::fs::write(&p, r#"{"a": {"id": 1}}"#).unwrap();
        assert!(read_calibration(&p).unwrap_err().contains("expected id, drive_mode"));
    }
}
