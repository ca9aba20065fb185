//! Small HDF5 helpers shared by the D4RL, Minari and ImagineBench readers and writers: open a
//! file with a clear error, read a float or flag column whatever its stored dtype, walk a group,
//! and write typed columns and scalars.
//!
//! Every function turns an `hdf5_metno::Error` into a [`DatasetError`] naming the file and key.

use std::path::Path;
use std::str::FromStr;

use hdf5_metno::types::{FloatSize, IntSize, TypeDescriptor, VarLenUnicode};
use hdf5_metno::{Dataset, File, Group, H5Type};

use crate::error::{DatasetError, Result};

/// The stored element type of a key, as far as o2o cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dtype {
    /// 32-bit float.
    Float32,
    /// 64-bit float.
    Float64,
    /// Boolean (h5py's enum FALSE/TRUE on int8).
    Bool,
    /// 32-bit signed integer.
    Int32,
    /// 64-bit signed integer.
    Int64,
    /// Any other integer (read as a number).
    OtherInt,
    /// A string (fixed or variable length).
    Str,
    /// Anything else (compound, reference…); listed but not read.
    Other,
}

impl Dtype {
    /// Classifies an HDF5 type.
    pub fn from_descriptor(d: &TypeDescriptor) -> Self {
        match d {
            TypeDescriptor::Float(FloatSize::U4) => Dtype::Float32,
            TypeDescriptor::Float(_) => Dtype::Float64,
            TypeDescriptor::Boolean => Dtype::Bool,
            TypeDescriptor::Enum(e) if is_bool_enum(e) => Dtype::Bool,
            TypeDescriptor::Integer(IntSize::U4) => Dtype::Int32,
            TypeDescriptor::Integer(IntSize::U8) => Dtype::Int64,
            TypeDescriptor::Integer(_) | TypeDescriptor::Unsigned(_) => Dtype::OtherInt,
            TypeDescriptor::FixedAscii(_)
            | TypeDescriptor::FixedUnicode(_)
            | TypeDescriptor::VarLenAscii
            | TypeDescriptor::VarLenUnicode => Dtype::Str,
            _ => Dtype::Other,
        }
    }

    /// numpy-style name (`float32`, `bool`, …).
    pub fn name(&self) -> &'static str {
        match self {
            Dtype::Float32 => "float32",
            Dtype::Float64 => "float64",
            Dtype::Bool => "bool",
            Dtype::Int32 => "int32",
            Dtype::Int64 => "int64",
            Dtype::OtherInt => "int",
            Dtype::Str => "string",
            Dtype::Other => "other",
        }
    }

    /// Whether values can be read as numbers.
    pub fn is_numeric(&self) -> bool {
        !matches!(self, Dtype::Str | Dtype::Other)
    }
}

impl std::fmt::Display for Dtype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

fn is_bool_enum(e: &hdf5_metno::types::EnumType) -> bool {
    e.members.len() == 2
        && e.members.iter().all(|m| (m.name == "FALSE" && m.value == 0) || (m.name == "TRUE" && m.value == 1))
}

/// A numeric array read from a file, as `f32`, with its shape and stored dtype.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// Shape as stored.
    pub shape: Vec<usize>,
    /// Stored element type (the writer writes it back as this).
    pub dtype: Dtype,
    /// Values in row-major order.
    pub data: Vec<f32>,
}

/// Opens `path` read-only; a missing file is an I/O error, anything else HDF5 cannot open
/// (truncated, corrupt, not HDF5) is [`DatasetError::Corrupt`].
pub fn open(path: &Path) -> Result<File> {
    if !path.exists() {
        return Err(DatasetError::io(path, std::io::Error::new(std::io::ErrorKind::NotFound, "no such file")));
    }
    let file =
        options().open(path).map_err(|e| DatasetError::Corrupt { path: path.to_path_buf(), message: e.to_string() })?;
    close_on_exec(&file);
    Ok(file)
}

/// Creates (truncates) `path` for writing, marked close-on-exec like [`open`].
pub fn create(path: &Path) -> Result<File> {
    // A write that cannot even start is the folder's fault, not a corrupt input: say so with
    // the OS's own reason, found by creating the file plainly first.
    if let Err(e) = std::fs::File::create(path) {
        let why = std::io::Error::new(e.kind(), format!("cannot create this file for writing: {e}"));
        return Err(DatasetError::io(path, why));
    }
    let file = options().create(path).map_err(|e| DatasetError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::other(format!("cannot write HDF5 here: {e}")),
    })?;
    close_on_exec(&file);
    Ok(file)
}

/// Opens `path` for reading and writing, marked close-on-exec like [`open`].
pub fn open_rw(path: &Path) -> Result<File> {
    let file = options()
        .open_rw(path)
        .map_err(|e| DatasetError::Corrupt { path: path.to_path_buf(), message: e.to_string() })?;
    close_on_exec(&file);
    Ok(file)
}

/// How every file is opened: without HDF5's own file locking.
///
/// HDF5 1.10 takes an `flock` on every file it opens. Our writers never expose a partial file
/// (they write a temp file, then rename), so the lock protects nothing here, while it fails on
/// file systems without `flock` and — because the lock travels with the descriptor — a child
/// process that inherits a descriptor keeps the file locked until it exits. That showed up as
/// "unable to lock file, errno = 11" in tests that open datasets on one thread while another
/// starts a subprocess, even with the descriptor marked close-on-exec right after opening
/// (a child forked between HDF5's `open` and our `fcntl` still inherits it).
fn options() -> hdf5_metno::FileBuilder {
    let mut builder = File::with_options();
    builder.with_fapl(|fapl| fapl.file_locking(false));
    builder
}

/// Marks the file descriptor under an open HDF5 file close-on-exec.
///
/// HDF5 opens files without `O_CLOEXEC` and holds an `flock` on them. A child process started
/// (by any thread) while a file is open inherits the descriptor and with it the lock, so the
/// next open of that file — by us, or by the child — fails with "unable to lock file, errno =
/// 11" until the child exits. Seen when a test thread wrote a dataset while another spawned
/// `o2o`; the same happens in any program that opens datasets and runs subprocesses.
fn close_on_exec(file: &File) {
    let mut handle: *mut std::ffi::c_void = std::ptr::null_mut();
    // SAFETY: `file.id()` is a valid open file id; HDF5 calls are serialized by the crate's lock.
    let rc = hdf5_metno::sync::sync(|| unsafe {
        hdf5_metno_sys::h5f::H5Fget_vfd_handle(file.id(), hdf5_metno_sys::h5p::H5P_DEFAULT, &mut handle)
    });
    if rc < 0 || handle.is_null() {
        return; // not a POSIX-file driver: nothing to mark
    }
    // SAFETY: for the default sec2 driver the handle points at the file's `int` descriptor.
    unsafe {
        let fd = *(handle as *const std::os::raw::c_int);
        let flags = libc::fcntl(fd, libc::F_GETFD);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
        }
    }
}

/// An HDF5 error on `key` of `path`.
pub fn h5err(path: &Path, key: &str, e: hdf5_metno::Error) -> DatasetError {
    DatasetError::Hdf5 { path: path.to_path_buf(), key: key.to_string(), message: e.to_string() }
}

/// The stored dtype of a dataset.
pub fn dtype_of(path: &Path, key: &str, ds: &Dataset) -> Result<Dtype> {
    let d = ds.dtype().and_then(|t| t.to_descriptor()).map_err(|e| h5err(path, key, e))?;
    Ok(Dtype::from_descriptor(&d))
}

/// Whether `key` exists (as a dataset or group) in `group`.
pub fn has(group: &Group, key: &str) -> bool {
    // link_exists only checks the last component; check each level for nested keys.
    let mut prefix = String::new();
    for part in key.split('/') {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        if !group.link_exists(&prefix) {
            return false;
        }
    }
    true
}

/// Reads a numeric key as `f32` (HDF5 converts f64 and integers; bools become 0/1).
pub fn read_numeric(path: &Path, group: &Group, key: &str) -> Result<Column> {
    let ds = group.dataset(key).map_err(|e| h5err(path, key, e))?;
    let dtype = dtype_of(path, key, &ds)?;
    let shape = ds.shape();
    let data = match dtype {
        Dtype::Bool => {
            let v: Vec<bool> = ds.read_raw().map_err(|e| h5err(path, key, e))?;
            v.into_iter().map(|b| if b { 1.0 } else { 0.0 }).collect()
        }
        Dtype::Str | Dtype::Other => {
            return Err(DatasetError::WrongDtype {
                path: path.to_path_buf(),
                key: key.to_string(),
                expected: "a number type (float32, float64, bool, integer)".into(),
                found: ds
                    .dtype()
                    .and_then(|t| t.to_descriptor())
                    .map(|d| d.to_string())
                    .unwrap_or_else(|_| dtype.to_string()),
            })
        }
        _ => {
            let mut data = zeroed_f32(ds.size());
            ds.read_into_raw(&mut data).map_err(|e| h5err(path, key, e))?;
            data
        }
    };
    Ok(Column { shape, dtype, data })
}

/// Reads several numeric keys and scans each for NaN/±∞ on a helper thread while the next key
/// is read (HDF5 reads are serialized by a global lock, so the scan would otherwise add to the
/// load time). Returns each column with its first non-finite value, in `keys` order.
pub fn read_numeric_scanned(
    path: &Path,
    group: &Group,
    keys: &[&str],
) -> Result<Vec<(Column, Option<(usize, usize, f64)>)>> {
    let (tx, rx) = std::sync::mpsc::channel::<Column>();
    let scanner = std::thread::spawn(move || {
        rx.into_iter()
            .map(|c| {
                let width = c.shape.get(1..).map(|s| s.iter().product()).unwrap_or(1);
                let bad = first_non_finite(&c.data, width);
                (c, bad)
            })
            .collect::<Vec<_>>()
    });
    let mut read_err = None;
    for key in keys {
        match read_numeric(path, group, key) {
            Ok(c) => {
                if tx.send(c).is_err() {
                    break;
                }
            }
            Err(e) => {
                read_err = Some(e);
                break;
            }
        }
    }
    drop(tx);
    let scanned = scanner
        .join()
        .map_err(|_| DatasetError::Invalid(format!("{}: the validation thread panicked", path.display())))?;
    match read_err {
        Some(e) => Err(e),
        None => Ok(scanned),
    }
}

/// A zeroed `f32` vector for a large read. Why: reading a 1M-row dataset into fresh memory
/// costs more in page faults (one per 4 KiB page) than in copying; asking the kernel for
/// transparent huge pages (2 MiB) cuts the faults 512-fold and the load time about 3x. numpy
/// does the same for its large arrays, which is why h5py was faster before.
pub fn zeroed_f32(n: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; n];
    #[cfg(target_os = "linux")]
    if n * 4 >= 4 << 20 {
        let page = 4096usize;
        let p = v.as_mut_ptr() as usize;
        let start = (p + page - 1) & !(page - 1);
        let end = (p + n * 4) & !(page - 1);
        if end > start {
            // SAFETY: [start, end) lies inside `v`'s live allocation and is page-aligned;
            // madvise only changes how the kernel backs those pages (a hint; errors ignored),
            // never their contents or ownership.
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    v
}

/// Reads a scalar or short string key.
pub fn read_string(path: &Path, group: &Group, key: &str) -> Result<String> {
    let ds = group.dataset(key).map_err(|e| h5err(path, key, e))?;
    let d = ds.dtype().and_then(|t| t.to_descriptor()).map_err(|e| h5err(path, key, e))?;
    let s = match d {
        TypeDescriptor::VarLenUnicode => ds.read_scalar::<VarLenUnicode>().map(|s| s.as_str().to_string()),
        TypeDescriptor::VarLenAscii => {
            ds.read_scalar::<hdf5_metno::types::VarLenAscii>().map(|s| s.as_str().to_string())
        }
        TypeDescriptor::FixedAscii(n) | TypeDescriptor::FixedUnicode(n) if n <= 1024 => {
            ds.read_scalar::<hdf5_metno::types::FixedAscii<1024>>().map(|s| s.as_str().to_string())
        }
        other => {
            return Err(DatasetError::WrongDtype {
                path: path.to_path_buf(),
                key: key.into(),
                expected: "a string".into(),
                found: other.to_string(),
            })
        }
    };
    s.map_err(|e| h5err(path, key, e))
}

/// Every dataset under `group`, recursively, as paths relative to the file root (no leading
/// slash), in sorted order.
pub fn walk_datasets(path: &Path, group: &Group) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![group.clone()];
    while let Some(g) = stack.pop() {
        for ds in g.datasets().map_err(|e| h5err(path, &g.name(), e))? {
            out.push(ds.name().trim_start_matches('/').to_string());
        }
        stack.extend(g.groups().map_err(|e| h5err(path, &g.name(), e))?);
    }
    out.sort();
    Ok(out)
}

/// Writes `data` (row-major, `shape`) to `key` as `dtype`, creating parent groups.
pub fn write_column(path: &Path, group: &Group, key: &str, shape: &[usize], dtype: Dtype, data: &[f32]) -> Result<()> {
    write_column_gzip(path, group, key, shape, dtype, data, None)
}

/// [`write_column`], optionally compressed: `gzip = Some(level)` (1–9) stores the column in
/// chunks of about 64 KiB through HDF5's shuffle and deflate filters, which h5py, D4RL and
/// every HDF5 reader decompress transparently.
pub fn write_column_gzip(
    path: &Path,
    group: &Group,
    key: &str,
    shape: &[usize],
    dtype: Dtype,
    data: &[f32],
    gzip: Option<u8>,
) -> Result<()> {
    match dtype {
        Dtype::Float64 => {
            write_typed_gzip(path, group, key, shape, &data.iter().map(|&v| v as f64).collect::<Vec<_>>(), gzip)
        }
        Dtype::Bool => {
            write_typed_gzip(path, group, key, shape, &data.iter().map(|&v| v != 0.0).collect::<Vec<_>>(), gzip)
        }
        Dtype::Int32 => {
            write_typed_gzip(path, group, key, shape, &data.iter().map(|&v| v as i32).collect::<Vec<_>>(), gzip)
        }
        Dtype::Int64 | Dtype::OtherInt => {
            write_typed_gzip(path, group, key, shape, &data.iter().map(|&v| v as i64).collect::<Vec<_>>(), gzip)
        }
        _ => write_typed_gzip(path, group, key, shape, data, gzip),
    }
}

/// Writes a typed slice to `key` with `shape`, creating parent groups.
pub fn write_typed<T: H5Type>(path: &Path, group: &Group, key: &str, shape: &[usize], data: &[T]) -> Result<()> {
    write_typed_gzip(path, group, key, shape, data, None)
}

/// [`write_typed`], optionally gzip-compressed (see [`write_column_gzip`]). Empty columns and
/// scalars are stored uncompressed (HDF5 chunks must be non-empty).
pub fn write_typed_gzip<T: H5Type>(
    path: &Path,
    group: &Group,
    key: &str,
    shape: &[usize],
    data: &[T],
    gzip: Option<u8>,
) -> Result<()> {
    let rows = shape.first().copied().unwrap_or(0);
    let row_bytes = std::mem::size_of::<T>() * shape.iter().skip(1).product::<usize>().max(1);
    let gzip = gzip.filter(|_| rows > 0 && !shape.is_empty());
    let create = |g: &Group, name: &str| {
        let b = g.new_dataset::<T>().shape(shape.to_vec());
        match gzip {
            Some(level) => {
                // Chunks of whole rows, about 64 KiB each; shuffle (bytes grouped by
                // significance) before deflate, as h5py's `compression="gzip", shuffle=True`.
                let mut chunk = shape.to_vec();
                chunk[0] = (65_536 / row_bytes).clamp(1, rows);
                b.chunk(chunk).shuffle().deflate(level.clamp(1, 9)).create(name)
            }
            None => b.create(name),
        }
    };
    let ds = create(group, key)
        .or_else(|_| {
            // Parent groups missing: create them, then retry.
            let parent = parent_group(group, key)?;
            create(&parent, key.rsplit('/').next().unwrap_or(key))
        })
        .map_err(|e| h5err(path, key, e))?;
    ds.write_raw(data).map_err(|e| h5err(path, key, e))
}

/// Writes a scalar string dataset (variable-length UTF-8).
pub fn write_string(path: &Path, group: &Group, key: &str, value: &str) -> Result<()> {
    let v = VarLenUnicode::from_str(value)
        .map_err(|e| DatasetError::Invalid(format!("{key}: string not storable in HDF5: {e}")))?;
    let parent = parent_group(group, key).map_err(|e| h5err(path, key, e))?;
    let name = key.rsplit('/').next().unwrap_or(key);
    let ds = parent.new_dataset::<VarLenUnicode>().shape(()).create(name).map_err(|e| h5err(path, key, e))?;
    ds.write_scalar(&v).map_err(|e| h5err(path, key, e))
}

/// Writes a scalar number dataset.
pub fn write_scalar<T: H5Type>(path: &Path, group: &Group, key: &str, value: &T) -> Result<()> {
    let parent = parent_group(group, key).map_err(|e| h5err(path, key, e))?;
    let name = key.rsplit('/').next().unwrap_or(key);
    let ds = parent.new_dataset::<T>().shape(()).create(name).map_err(|e| h5err(path, key, e))?;
    ds.write_scalar(value).map_err(|e| h5err(path, key, e))
}

/// The group that will hold `key` (everything before its last `/`), created if missing.
fn parent_group(group: &Group, key: &str) -> hdf5_metno::Result<Group> {
    let mut g = group.clone();
    let parts: Vec<&str> = key.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        g = if g.link_exists(part) { g.group(part)? } else { g.create_group(part)? };
    }
    Ok(g)
}

/// The first non-finite value of a row-major column, as `(row, column, value)`.
pub fn first_non_finite(data: &[f32], width: usize) -> Option<(usize, usize, f64)> {
    // An f32 is NaN or ±∞ exactly when its exponent bits are all ones. OR-ing that test over a
    // chunk (no early exit) lets the compiler vectorize the scan; only a chunk that contains a
    // bad value is searched element by element.
    const EXP: u32 = 0x7f80_0000;
    let w = width.max(1);
    for (c, chunk) in data.chunks(4096).enumerate() {
        let bad = chunk.iter().fold(0u32, |acc, x| acc | ((x.to_bits() & EXP == EXP) as u32));
        if bad != 0 {
            let i = chunk.iter().position(|v| !v.is_finite()).map(|i| c * 4096 + i)?;
            return Some((i / w, i % w, data[i] as f64));
        }
    }
    None
}
