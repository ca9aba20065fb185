//! Offscreen RGB renders of a MuJoCo task's named cameras, as PNG bytes (cargo feature `render`).
//!
//! mujoco-rs's renderer opens an OpenGL context on the first EGL device that yields one, so it
//! works headless: with a GPU's EGL driver, or Mesa's software EGL (`libegl1` + `libegl-mesa0`,
//! installed by scripts/setup.sh) on a machine without one. The feature is off by default: the
//! renderer pulls in glutin and needs EGL at run time, which training never does. Frames feed
//! the GRM client (`o2o_reward_models::grm`), whose prompt takes camera images.

use crate::error::EnvError;
use mujoco_rs::prelude::*;
use mujoco_rs::renderer::MjRenderer;

/// One offscreen renderer of `width × height` RGB frames for one model.
pub struct CameraRenderer {
    renderer: MjRenderer,
    width: usize,
    height: usize,
}

impl CameraRenderer {
    /// A renderer for `model`. Fails (instead of rendering nothing) when no EGL device gives an
    /// OpenGL context, or the size is zero or above the model's offscreen buffer.
    pub fn new(model: &MjModel, width: usize, height: usize) -> Result<Self, EnvError> {
        let renderer = MjRenderer::new(model, width, height, 0).map_err(|e| {
            EnvError::Other(format!(
                "offscreen renderer ({width}×{height}): {e} (needs an EGL device: a GPU driver or Mesa's libegl-mesa0)"
            ))
        })?;
        Ok(Self { renderer, width, height })
    }

    /// The frame size.
    pub fn size(&self) -> (usize, usize) {
        (self.width, self.height)
    }

    /// The RGB frame (row-major, 3 bytes a pixel, top row first) of the model's camera `camera`
    /// in the state `data` holds.
    pub fn rgb(&mut self, data: &mut super::Data, camera: &str) -> Result<Vec<u8>, EnvError> {
        let id = data
            .model()
            .name_to_id(MjtObjBase::mjOBJ_CAMERA, camera)
            .ok_or_else(|| EnvError::Other(format!("the model has no camera named `{camera}`")))?;
        self.renderer.set_camera(MjvCamera::new_fixed(id));
        self.renderer.sync_data(data).map_err(|e| EnvError::Other(format!("rendering camera {camera}: {e}")))?;
        self.renderer.render().map_err(|e| EnvError::Other(format!("rendering camera {camera}: {e}")))?;
        let rgb = self.renderer.rgb_flat().ok_or_else(|| EnvError::Other("the renderer has no RGB buffer".into()))?;
        // OpenGL reads rows bottom-up: flip to the top-first order of image files.
        let row = 3 * self.width;
        Ok(rgb.chunks_exact(row).rev().flatten().copied().collect())
    }

    /// [`CameraRenderer::rgb`] encoded as a PNG file's bytes.
    pub fn png(&mut self, data: &mut super::Data, camera: &str) -> Result<Vec<u8>, EnvError> {
        let rgb = self.rgb(data, camera)?;
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, self.width as u32, self.height as u32);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let err = |e: png::EncodingError| EnvError::Other(format!("encoding a PNG of camera {camera}: {e}"));
        let mut w = enc.write_header().map_err(err)?;
        w.write_image_data(&rgb).map_err(err)?;
        w.finish().map_err(err)?;
        Ok(out)
    }
}
