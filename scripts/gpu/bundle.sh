#!/usr/bin/env bash
# The GPU bundle (issue 49): everything `scripts/gpu/check.sh` needs on a GPU machine that has
# its own PyTorch (2.11, CUDA 13) and no Rust toolchain, in one git-ignored folder and tarball.
#
#   scripts/gpu/bundle.sh [OUT_DIR]        # default: gpu-bundle/ (and gpu-bundle.tar.gz) in the repo
#
# 1. libtorch 2.11's headers and libraries, from PyPI's torch 2.11.0 wheel (cached under
#    $O2O_HOME/libtorch-2.11.0): the binary must be built against the libtorch it will load.
# 2. A copy of the working tree's sources with `tch` pinned to 0.24.0, the tch release made for
#    libtorch 2.11 (tch 0.26 does not compile against 2.11's headers; the API o2o uses is the
#    same in both), built in release into its own target dir ($O2O_HOME/gpu-target), linked
#    with libtorch's CUDA backend (experiments/build.rs) and an RPATH (DT_RPATH, which also
#    serves the libraries it loads) of `$ORIGIN/../lib`.
# 3. The bundle: bin/o2o (stripped); lib/ with libmujoco and the HDF5 library with the shared
#    libraries it pulls in that are not glibc's, the C++ runtime's (the system's serve: the binary
#    needs GLIBCXX_3.4.29 at most, written to REQUIRES), libtorch's or CUDA's; found through the
#    binary's RPATH only, so nothing else the check starts (python, JAX) sees them; assets/
#    (Gymnasium's MuJoCo XMLs) and robotics-assets/ (the Fetch XMLs and meshes); data/ (the
#    `make demo` file and its manifest); scripts/ (the check and the reference benchmarks);
#    env.sh, which points the binary at the machine's torch and CUDA libraries (found through
#    `python3 -c 'import torch'`), and an `o2o` wrapper that sources it.
# 4. Checked here, against libtorch 2.11's CPU libraries (the venv's CUDA 13 libraries stand in
#    for the GPU machine's): `o2o doctor` and a short run of the demo's preset on the CPU.
#
# Costs: the wheel is 530 MB (downloaded once); the first build compiles torch-sys and the
# workspace (~15-25 min on one core), later ones only what changed.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
home="${O2O_HOME:-$HOME/.cache/o2o}"
torch_version=2.11.0
tch_version=0.24.0
out="$(realpath -m "${1:-$repo/gpu-bundle}")"
say() { echo "bundle: $*" >&2; }
die() { echo "bundle: error: $*" >&2; exit 1; }

venv_python="$home/venv/bin/python"
[ -x "$venv_python" ] || die "$venv_python is missing: run \`make setup\` first"
[ -d "$home/mujoco-lib" ] || die "$home/mujoco-lib is missing: run \`make setup\` first"

# --- 1. libtorch 2.11 -------------------------------------------------------------------------
libtorch="$home/libtorch-$torch_version"
if [ ! -f "$libtorch/lib/libtorch_cuda.so" ] || [ ! -f "$libtorch/version.py" ]; then
    wheels="$home/torch-$torch_version-wheel"
    mkdir -p "$wheels"
    if ! ls "$wheels"/torch-"$torch_version"-*.whl >/dev/null 2>&1; then
        say "downloading PyPI's torch $torch_version wheel (530 MB) into $wheels"
        "$home/venv/bin/pip" download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
            --implementation cp --platform manylinux_2_28_x86_64 "torch==$torch_version" -d "$wheels"
    fi
    wheel="$(ls "$wheels"/torch-"$torch_version"-*.whl | head -1)"
    say "extracting torch/include, torch/lib and torch/version.py from $(basename "$wheel")"
    rm -rf "$libtorch.tmp"
    "$venv_python" - "$wheel" "$libtorch.tmp" <<'EOF'
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        name = info.filename
        if name.startswith(("torch/include/", "torch/lib/")) or name == "torch/version.py":
            path = os.path.join(dest, name[len("torch/"):])
            if name.endswith("/"):
                continue
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with z.open(info) as src, open(path, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            os.chmod(path, 0o755 if name.startswith("torch/lib/") else 0o644)
EOF
    rm -rf "$libtorch" && mv "$libtorch.tmp" "$libtorch"
fi
grep -q "__version__ = '$torch_version" "$libtorch/version.py" || die "$libtorch/version.py is not torch $torch_version"

# --- 2. the sources, tch pinned, built ---------------------------------------------------------
src="$home/gpu-src"
rev="$(git -C "$repo" rev-parse HEAD)"
[ -z "$(git -C "$repo" status --porcelain --untracked-files=no)" ] || rev="$rev-dirty"
say "copying the sources of $repo ($rev) into $src"
rm -rf "$src" && mkdir -p "$src"
# Tracked and untracked-but-not-ignored files, without the data and the experiments' results
# (nothing is built from them), mtimes kept, so a rebuild only redoes what changed.
git -C "$repo" ls-files -z --cached --others --exclude-standard -- . ':!:data' ':!:experiments/results' \
    | "$venv_python" -c '
import os, shutil, sys
repo, src = sys.argv[1], sys.argv[2]
for name in sys.stdin.buffer.read().decode().split("\0"):
    path = os.path.join(repo, name)
    if name and os.path.isfile(path):  # a tracked file deleted in the working tree is skipped
        os.makedirs(os.path.dirname(os.path.join(src, name)), exist_ok=True)
        shutil.copy2(path, os.path.join(src, name))
' "$repo" "$src"
grep -q '^tch = "0.26"$' "$src/Cargo.toml" || die "Cargo.toml no longer says tch = \"0.26\": update this script"
sed -i "s/^tch = \"0.26\"$/tch = \"=$tch_version\"/" "$src/Cargo.toml"
(cd "$src" && cargo update --quiet -p tch --precise "$tch_version")

say "building o2o against libtorch $torch_version (tch $tch_version) into $home/gpu-target"
(
    cd "$src"
    unset LIBTORCH_USE_PYTORCH
    export LIBTORCH="$libtorch" LIBTORCH_CXX11_ABI=1 MUJOCO_DYNAMIC_LINK_DIR="$home/mujoco-lib"
    export O2O_GIT_REVISION="$rev (tch $tch_version, libtorch $torch_version)" CARGO_TARGET_DIR="$home/gpu-target"
    export RUSTFLAGS='-C link-arg=-Wl,-rpath,$ORIGIN/../lib'
    # DT_RPATH rather than RUNPATH (for the binary only, so the dependencies stay built with the
    # flags above): it also resolves the libraries libhdf5 loads.
    cargo rustc --release -p o2o-experiments --bin o2o -- -C link-arg=-Wl,--disable-new-dtags
)
built="$home/gpu-target/release/o2o"
readelf -d "$built" | grep -q '\[libtorch_cuda.so\]' || die "$built does not link libtorch_cuda.so"
readelf -d "$built" | grep -q '(RPATH).*\$ORIGIN/../lib' || die "$built has no RPATH \$ORIGIN/../lib"

# --- 3. the bundle -------------------------------------------------------------------------------
say "assembling $out"
rm -rf "$out.tmp" && mkdir -p "$out.tmp"/{bin,lib,assets,robotics-assets/stls,data/halfcheetah-small,scripts/gpu}
objcopy --strip-all "$built" "$out.tmp/bin/o2o"
cp -L "$home/mujoco-lib"/libmujoco.so.* "$out.tmp/lib/"
# The binary's shared libraries as this machine resolves them, less glibc's (the system's own),
# libtorch's and CUDA's (the GPU machine's torch brings them) and libmujoco (copied above).
nvidia_libs="$("$venv_python" -c 'import glob, os, nvidia; print(":".join(sorted(glob.glob(os.path.join(os.path.dirname(nvidia.__path__[0]), "nvidia", "*", "lib")))))')"
LD_LIBRARY_PATH="$libtorch/lib:$nvidia_libs:$home/mujoco-lib" ldd "$out.tmp/bin/o2o" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' \
    | while read -r name path; do
        case "$name" in
        libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|libresolv.so.*|libutil.so.*|ld-linux*|libanl.so.*) continue ;;
        libstdc++.so.*|libgcc_s.so.*) continue ;;
        esac
        case "$path" in
        "$libtorch"/*|*/nvidia/*|"$home"/mujoco-lib/*|"$out.tmp"/*) continue ;;
        esac
        cp -L "$path" "$out.tmp/lib/$name"
    done
cp "$("$venv_python" -c 'import gymnasium, os; print(os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets"))')"/* "$out.tmp/assets/"
robotics="$("$venv_python" -c 'import gymnasium_robotics, os; print(os.path.join(os.path.dirname(gymnasium_robotics.__file__), "envs", "assets"))')"
cp -r "$robotics/fetch" "$robotics/textures" "$out.tmp/robotics-assets/"
cp -r "$robotics/stls/fetch" "$out.tmp/robotics-assets/stls/"
# The demo's file and its manifest only (a regenerated random/expert file would not fit).
cp "$repo/data/halfcheetah-small"/{halfcheetah-medium-v2.hdf5,manifest.json} "$out.tmp/data/halfcheetah-small/"
cp "$repo/scripts/bench_update_torch.py" "$out.tmp/scripts/"
cp "$repo"/scripts/gpu/check.sh "$repo"/scripts/gpu/bench_update_py.py "$out.tmp/scripts/gpu/"
cat > "$out.tmp/env.sh" <<'EOF'
# Source this: points the bundle's o2o at this machine's torch and CUDA libraries.
# O2O_PYTHON: the python whose torch to use (default: python3 on PATH).
o2o_bundle="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)"
O2O_PYTHON="${O2O_PYTHON:-$(command -v python3)}"
# O2O_TORCH_LIBS (colon-separated folders) instead: a dry run on a machine whose python has
# another torch than the one the bundle was built against.
o2o_torch_libs="${O2O_TORCH_LIBS:-$("$O2O_PYTHON" - <<'PY'
import glob, os, torch
site = os.path.dirname(os.path.dirname(torch.__file__))
print(":".join([os.path.join(os.path.dirname(torch.__file__), "lib")] + sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))))
PY
)}" || { echo "env.sh: $O2O_PYTHON cannot import torch" >&2; return 1 2>/dev/null || exit 1; }
# Only torch's and CUDA's folders: the bundle's own lib/ is reached through bin/o2o's RPATH, so
# python and JAX keep the system's libraries.
export LD_LIBRARY_PATH="$o2o_torch_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export O2O_PYTHON O2O_GYM_ASSETS="$o2o_bundle/assets" O2O_ROBOTICS_ASSETS="$o2o_bundle/robotics-assets"
export O2O_SCRIPTS="$o2o_bundle/scripts"
export O2O_BUNDLE="$o2o_bundle"
EOF
cat > "$out.tmp/o2o" <<'EOF'
#!/usr/bin/env bash
# The bundle's o2o against this machine's torch (see env.sh).
. "$(cd "$(dirname "$0")" && pwd)/env.sh"
exec "$O2O_BUNDLE/bin/o2o" "$@"
EOF
chmod +x "$out.tmp/o2o" "$out.tmp/scripts/gpu/check.sh"
printf '%s\n' "$rev" > "$out.tmp/REVISION"
# What the target system must have: glibc and libstdc++ symbol versions, highest first.
{
    echo "glibc: $(objdump -T "$out.tmp/bin/o2o" "$out.tmp"/lib/*.so* 2>/dev/null | grep -o 'GLIBC_2\.[0-9]*' | sort -uV | tail -1)"
    echo "libstdc++: $(objdump -T "$out.tmp/bin/o2o" "$out.tmp"/lib/*.so* 2>/dev/null | grep -o 'GLIBCXX_3\.4\.[0-9]*' | sort -uV | tail -1)"
} > "$out.tmp/REQUIRES"
rm -rf "$out" && mv "$out.tmp" "$out"
tar -czf "$out.tar.gz.tmp" -C "$(dirname "$out")" "$(basename "$out")" && mv "$out.tar.gz.tmp" "$out.tar.gz"
size_dir=$(du -sb "$out" | cut -f1)
size_tar=$(stat -c %s "$out.tar.gz")
say "$out: $((size_dir / 1048576)) MiB; $out.tar.gz: $((size_tar / 1048576)) MiB"
[ "$size_tar" -lt $((64 * 1048576)) ] || die "$out.tar.gz is over 64 MiB"

# --- 4. checked here on the CPU against libtorch 2.11 ------------------------------------------
say "checking the bundle here: doctor and a short CPU run against libtorch $torch_version"
check="$(mktemp -d /tmp/o2o-bundle-check.XXXXXX)"
trap 'rm -rf "$check"' EXIT
run_bundle() {
    env -u O2O_VENV -u O2O_PYTHON -u O2O_GYM_ASSETS -u O2O_SCRIPTS -u O2O_ROBOTICS_ASSETS \
        LD_LIBRARY_PATH="$libtorch/lib:$nvidia_libs" O2O_GYM_ASSETS="$out/assets" O2O_SCRIPTS="$out/scripts" \
        O2O_ROBOTICS_ASSETS="$out/robotics-assets" O2O_PYTHON="$venv_python" "$out/bin/o2o" "$@"
}
run_bundle doctor | tee "$check/doctor.txt" >&2 || true
grep -q "^libtorch .*$torch_version" "$check/doctor.txt" || die "doctor does not report libtorch $torch_version"
grep -q "^cuda backend .*loaded" "$check/doctor.txt" || die "doctor does not report the CUDA backend loaded"
(cd "$check" && run_bundle run --preset wsrl-halfcheetah-small --device cpu --threads 1 --rerun=off --progress off \
    --set "dataset.path=\"$out/data/halfcheetah-small/halfcheetah-medium-v2.hdf5\"" \
    --set train.offline_steps=200 --set train.warmup_steps=100 --set train.online_steps=400 --set train.online_batch_size=256 \
    --set eval.every=100 --set eval.episodes=1 --runs-dir "$check/runs" >"$check/run.log" 2>&1) \
    || { tail -20 "$check/run.log" >&2; die "the short CPU run failed"; }
grep -q "tch $tch_version" "$check"/runs/*/manifest.json || die "the run's manifest does not name the bundle's build"
grep -q '"grad_step"' "$check"/runs/*/metrics.jsonl && [ "$(tail -1 "$check"/runs/*/metrics.jsonl | grep -o '"grad_step":[0-9]*' | cut -d: -f2)" -gt 200 ] \
    || die "the short CPU run made no online update"
say "ok: $(grep -m1 '^libtorch' "$check/doctor.txt"); short CPU run finished ($(ls "$check"/runs)); needs $(tr '\n' ' ' < "$out/REQUIRES")"
