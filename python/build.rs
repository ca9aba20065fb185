//! Where the extension finds libtorch and libmujoco at load time.
//!
//! The build environment (.cargo/config.toml, written by scripts/setup.sh) already gives every
//! binary an rpath to the set-up venv's `torch/lib` and MuJoCo folder. The installed module
//! (`site-packages/o2o/o2o.abi3.so`) also looks beside itself, in the `torch` and `mujoco`
//! packages of the environment it is installed in, so a wheel built here works in another
//! environment that has the same torch and mujoco.
fn main() {
    for dir in ["$ORIGIN/../torch/lib", "$ORIGIN/../mujoco"] {
        println!("cargo:rustc-link-arg-cdylib=-Wl,-rpath,{dir}");
    }
}
