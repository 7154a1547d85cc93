//! Columns of an analysis' input batches as one array of one type (`int64_column`,
//! `text_column`, ...), region names as small ids (`RegionIds`, `each_name`), the schema of an analysis's own
//! rows (`schema_of`), and Arrow's errors as DataFusion's.

use std::fmt;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow::compute::{cast, concat};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use commdb_catalog::fast_hash::FastMap;
use datafusion::error::{DataFusionError, Result};

/// The schema of `fields`: name, type, whether it may be null.
pub fn schema_of(fields: &[(&str, DataType, bool)]) -> SchemaRef {
    let fields: Vec<Field> = fields.iter().map(|(name, t, null)| Field::new(*name, t.clone(), *null)).collect();
    std::sync::Arc::new(Schema::new(fields))
}

/// One column of all batches as a single array cast to `to`.
pub fn column(batches: &[RecordBatch], index: usize, to: &DataType) -> Result<ArrayRef> {
    let parts: Vec<ArrayRef> = batches.iter().map(|b| cast(b.column(index), to)).collect::<Result<_, _>>()?;
    if parts.is_empty() {
        return Ok(arrow::array::new_empty_array(to));
    }
    let refs: Vec<&dyn Array> = parts.iter().map(AsRef::as_ref).collect();
    Ok(concat(&refs)?)
}

/// An Int64 column of all batches.
pub fn int64_column(batches: &[RecordBatch], index: usize) -> Result<Int64Array> {
    Ok(column(batches, index, &DataType::Int64)?.as_primitive::<Int64Type>().clone())
}

/// A text column of all batches.
pub fn text_column(batches: &[RecordBatch], index: usize) -> Result<StringArray> {
    Ok(column(batches, index, &DataType::Utf8)?.as_string::<i32>().clone())
}

/// A Boolean column of all batches.
pub fn bool_column(batches: &[RecordBatch], index: usize) -> Result<BooleanArray> {
    Ok(column(batches, index, &DataType::Boolean)?.as_boolean().clone())
}

/// The region of every row of column `index` as an id into `names` (None for NULL and for
/// names `keep` rejects), reading dictionary-encoded regions once per dictionary entry used (`each_name`).
pub fn region_ids(
    batches: &[RecordBatch],
    index: usize,
    keep: impl Fn(&str) -> bool,
    names: &mut Vec<String>,
) -> Result<Vec<Option<u32>>> {
    let mut ids = RegionIds::new(keep);
    let mut out = Vec::new();
    for b in batches {
        ids.append(b.column(index), names, &mut out)?;
    }
    Ok(out)
}

/// Region names as ids into a list of names, a column at a time (see `region_ids`).
pub struct RegionIds<K> {
    keep: K,
    ids: FastMap<String, u32>,
}

impl<K> fmt::Debug for RegionIds<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegionIds").field("ids", &self.ids.len()).finish_non_exhaustive()
    }
}

impl<K: Fn(&str) -> bool> RegionIds<K> {
    pub fn new(keep: K) -> Self {
        RegionIds { keep, ids: FastMap::default() }
    }

    /// The id of region `name` (None: not kept), named in `names` when it is new.
    pub fn id(&mut self, name: &str, names: &mut Vec<String>) -> Option<u32> {
        if !(self.keep)(name) {
            return None;
        }
        if let Some(id) = self.ids.get(name) {
            return Some(*id);
        }
        names.push(name.to_string());
        let id = names.len() as u32 - 1;
        self.ids.insert(name.to_string(), id);
        Some(id)
    }

    /// The id of every row of `col` appended to `out`.
    pub fn append(&mut self, col: &ArrayRef, names: &mut Vec<String>, out: &mut Vec<Option<u32>>) -> Result<()> {
        each_name(col, out, |name| name.and_then(|n| self.id(n, names)))
    }
}

/// `id(name)` of every row of the text column `col` (None for NULL) appended to `out`, in row
/// order; a dictionary's entries are named once each, when a row first uses them, so that ids
/// given out by `id` come in the order of the rows whether the column is dictionary-encoded or
/// not.
pub fn each_name<T: Copy>(col: &ArrayRef, out: &mut Vec<T>, mut id: impl FnMut(Option<&str>) -> T) -> Result<()> {
    let Some(dict) = col.as_any_dictionary_opt() else {
        let text = cast(col, &DataType::Utf8)?;
        let text = text.as_string::<i32>();
        out.extend((0..text.len()).map(|i| id(text.is_valid(i).then(|| text.value(i)))));
        return Ok(());
    };
    let values = cast(dict.values(), &DataType::Utf8)?;
    let values = values.as_string::<i32>();
    let keys = cast(dict.keys(), &DataType::Int64)?;
    let keys = keys.as_primitive::<Int64Type>();
    let mut per_entry: Vec<Option<T>> = vec![None; values.len()];
    for i in 0..keys.len() {
        if keys.is_null(i) {
            out.push(id(None));
            continue;
        }
        let e = usize::try_from(keys.value(i))
            .ok()
            .filter(|&e| e < values.len())
            .ok_or_else(|| DataFusionError::Internal(format!("a dictionary key {} has no entry", keys.value(i))))?;
        let found = match per_entry[e] {
            Some(found) => found,
            None => {
                let found = id(values.is_valid(e).then(|| values.value(e)));
                per_entry[e] = Some(found);
                found
            }
        };
        out.push(found);
    }
    Ok(())
}

/// Turn an Arrow error into a DataFusion one.
pub fn arrow_err(e: arrow::error::ArrowError) -> DataFusionError {
    DataFusionError::ArrowError(Box::new(e), None)
}
