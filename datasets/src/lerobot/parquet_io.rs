//! Reading LeRobot Parquet columns into flat vectors.
//!
//! LeRobot (through Hugging Face `datasets`) stores a feature of shape `[1]` as a plain column
//! (`float32`, `bool`, `int64`) and a vector feature of shape `[n]` as a list column
//! (`fixed_size_list<n>` when written by `datasets`, a variable `list` when written by pandas).
//! Both are read here into row-major vectors of `width` values per row, with the width, nulls
//! and (for floats) finiteness checked and reported with the file and key.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float32Type, Int64Type};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use crate::error::{DatasetError, Result};

/// The requested columns of one Parquet file, as record batches.
pub struct Table {
    /// The file (for messages).
    pub path: PathBuf,
    /// Rows in the file.
    pub rows: usize,
    batches: Vec<RecordBatch>,
}

pub(crate) fn parquet_err(path: &Path, e: impl std::fmt::Display) -> DatasetError {
    DatasetError::Parquet { path: path.to_path_buf(), message: e.to_string() }
}

/// Reads the root columns `keys` of `path`. A key the file lacks is an error naming the file
/// unless it is in `optional`.
pub fn read_table(path: &Path, keys: &[&str], optional: &[&str]) -> Result<Table> {
    let file = File::open(path).map_err(|e| DatasetError::io(path, e))?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| parquet_err(path, e))?;
    let schema = builder.schema().clone();
    let mut roots = Vec::new();
    for key in keys.iter().chain(optional) {
        match schema.index_of(key) {
            Ok(i) => roots.push(i),
            Err(_) if optional.contains(key) => {}
            Err(_) => {
                return Err(DatasetError::MissingKey {
                    path: path.into(),
                    key: (*key).into(),
                    expected: format!(
                        "a column `{key}` (the file has {:?})",
                        schema.fields().iter().map(|f| f.name().as_str()).collect::<Vec<_>>()
                    ),
                })
            }
        }
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let reader = builder.with_projection(mask).build().map_err(|e| parquet_err(path, e))?;
    let batches = reader.collect::<std::result::Result<Vec<_>, _>>().map_err(|e| parquet_err(path, e))?;
    let rows = batches.iter().map(|b| b.num_rows()).sum();
    Ok(Table { path: path.to_path_buf(), rows, batches })
}

impl Table {
    /// Whether the file has column `key` (among those read).
    pub fn has(&self, key: &str) -> bool {
        self.batches.first().is_none_or(|b| b.column_by_name(key).is_some())
    }

    fn columns(&self, key: &str) -> Result<Vec<ArrayRef>> {
        self.batches
            .iter()
            .map(|b| {
                b.column_by_name(key).cloned().ok_or_else(|| DatasetError::MissingKey {
                    path: self.path.clone(),
                    key: key.into(),
                    expected: "a column of every row".into(),
                })
            })
            .collect()
    }

    fn no_nulls(&self, key: &str, a: &dyn Array) -> Result<()> {
        if a.null_count() > 0 {
            return Err(DatasetError::BadValue {
                path: self.path.clone(),
                key: key.into(),
                expected: "a value in every row".into(),
                found: format!("{} null values", a.null_count()),
            });
        }
        Ok(())
    }

    /// Column `key` as `f32`, `width` values per row (row-major). Accepts scalar columns of any
    /// numeric or boolean type when `width == 1` and list columns of `width` elements.
    pub fn f32_rows(&self, key: &str, width: usize) -> Result<Vec<f32>> {
        let mut out = Vec::with_capacity(self.rows * width);
        for col in self.columns(key)? {
            self.no_nulls(key, &col)?;
            let wrong_shape = |found: Vec<usize>| DatasetError::WrongShape {
                path: self.path.clone(),
                key: key.into(),
                expected: format!("{width} value(s) per row, as meta/info.json declares"),
                found,
            };
            let flat: ArrayRef = match col.data_type() {
                DataType::FixedSizeList(_, n) => {
                    let list = col.as_fixed_size_list();
                    if *n as usize != width {
                        return Err(wrong_shape(vec![list.len(), *n as usize]));
                    }
                    let start = if list.is_empty() { 0 } else { list.value_offset(0) as usize };
                    list.values().slice(start, list.len() * width)
                }
                DataType::List(_) | DataType::LargeList(_) => {
                    let (offsets, values): (Vec<usize>, &ArrayRef) = match col.data_type() {
                        DataType::List(_) => {
                            let l = col.as_list::<i32>();
                            (l.value_offsets().iter().map(|o| *o as usize).collect(), l.values())
                        }
                        _ => {
                            let l = col.as_list::<i64>();
                            (l.value_offsets().iter().map(|o| *o as usize).collect(), l.values())
                        }
                    };
                    if let Some(row) = offsets.windows(2).position(|w| w[1] - w[0] != width) {
                        return Err(wrong_shape(vec![row, offsets[row + 1] - offsets[row]]));
                    }
                    let (first, last) = (offsets.first().copied().unwrap_or(0), offsets.last().copied().unwrap_or(0));
                    values.slice(first, last - first)
                }
                t if width == 1 && (t.is_numeric() || *t == DataType::Boolean) => col.clone(),
                t => {
                    return Err(DatasetError::WrongDtype {
                        path: self.path.clone(),
                        key: key.into(),
                        expected: if width == 1 {
                            "a numeric or boolean column".into()
                        } else {
                            format!("a list of {width} numbers per row")
                        },
                        found: t.to_string(),
                    })
                }
            };
            self.no_nulls(key, &flat)?;
            if !(flat.data_type().is_numeric() || *flat.data_type() == DataType::Boolean) {
                return Err(DatasetError::WrongDtype {
                    path: self.path.clone(),
                    key: key.into(),
                    expected: "numbers or booleans".into(),
                    found: col.data_type().to_string(),
                });
            }
            let cast = arrow_cast::cast(&flat, &DataType::Float32).map_err(|e| parquet_err(&self.path, e))?;
            out.extend_from_slice(cast.as_primitive::<Float32Type>().values());
        }
        Ok(out)
    }

    /// Like [`f32_rows`](Self::f32_rows), and every value must be finite.
    pub fn finite_f32_rows(&self, key: &str, width: usize, first_row: usize) -> Result<Vec<f32>> {
        let v = self.f32_rows(key, width)?;
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return Err(DatasetError::NonFinite {
                path: self.path.clone(),
                key: key.into(),
                row: first_row + i / width.max(1),
                column: i % width.max(1),
                value: v[i] as f64,
            });
        }
        Ok(v)
    }

    /// Integer column `key` (any integer type).
    pub fn i64_column(&self, key: &str) -> Result<Vec<i64>> {
        let mut out = Vec::with_capacity(self.rows);
        for col in self.columns(key)? {
            self.no_nulls(key, &col)?;
            if !col.data_type().is_integer() {
                return Err(DatasetError::WrongDtype {
                    path: self.path.clone(),
                    key: key.into(),
                    expected: "an integer column".into(),
                    found: col.data_type().to_string(),
                });
            }
            let cast = arrow_cast::cast(&col, &DataType::Int64).map_err(|e| parquet_err(&self.path, e))?;
            out.extend_from_slice(cast.as_primitive::<Int64Type>().values());
        }
        Ok(out)
    }

    /// String column `key`.
    pub fn string_column(&self, key: &str) -> Result<Vec<String>> {
        let mut out = Vec::with_capacity(self.rows);
        for col in self.columns(key)? {
            self.no_nulls(key, &col)?;
            let cast = arrow_cast::cast(&col, &DataType::Utf8).map_err(|_| DatasetError::WrongDtype {
                path: self.path.clone(),
                key: key.into(),
                expected: "a string column".into(),
                found: col.data_type().to_string(),
            })?;
            out.extend(cast.as_string::<i32>().iter().map(|s| s.unwrap_or_default().to_string()));
        }
        Ok(out)
    }

    /// List-of-strings column `key` (an episode's `tasks`); rows are empty when absent.
    pub fn string_list_column(&self, key: &str) -> Result<Vec<Vec<String>>> {
        let mut out = Vec::with_capacity(self.rows);
        for col in self.columns(key)? {
            let as_list = arrow_cast::cast(
                &col,
                &DataType::List(Arc::new(arrow_schema::Field::new("item", DataType::Utf8, true))),
            )
            .map_err(|_| DatasetError::WrongDtype {
                path: self.path.clone(),
                key: key.into(),
                expected: "a list of strings per row".into(),
                found: col.data_type().to_string(),
            })?;
            let list = as_list.as_list::<i32>();
            for i in 0..list.len() {
                let row = list.value(i);
                out.push(row.as_string::<i32>().iter().map(|s| s.unwrap_or_default().to_string()).collect());
            }
        }
        Ok(out)
    }
}
