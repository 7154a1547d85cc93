//! The values a part of a stored table holds in its kind column, when they are few: the
//! events' `kind` (enter, leave, isend, ..., and thread_fork, thread_join, the locks' or the
//! GPU's kinds only in the traces that have them). The manifest lists them per part, so that a
//! scan whose filters allow none of a part's values (`kind IN ('thread_fork', 'thread_join')`
//! on a trace without OpenMP) neither checks nor reads it ([`crate::session::parts`]).
//! DataFusion's pruning by the Parquet files' min/max statistics skips such a part as well, but
//! only as the scan runs, after the part's columns have been read whole for their checksums
//! (`crate::session::trace_table`); and a range of names rules out only the values outside it,
//! where a list rules out every value it lacks. The idea is that of a zone map's value list.

use std::collections::BTreeSet;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::datatypes::{ArrowDictionaryKeyType, ArrowNativeType, DataType, Int8Type, Int16Type, Int32Type};

/// A part lists at most this many values of its column; beyond, none (a scan keeps the part).
pub const MOST_LISTED: usize = 64;

/// The column whose values a part of `table` lists.
pub fn listed_column(table: &str) -> Option<&'static str> {
    match table {
        "events" => Some("kind"),
        _ => None,
    }
}

/// The distinct values (NULL left out) of one column in a part, in order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartValues {
    pub column: String,
    pub values: Vec<String>,
}

/// The values of a column gathered over the batches of a part as it is written.
#[derive(Debug, Default)]
pub struct ValueSet {
    values: BTreeSet<String>,
    /// More than `MOST_LISTED` values, or a column of a type not listed: nothing is listed.
    unlisted: bool,
}

impl ValueSet {
    /// Add the values of `column` in `batch` (a batch without it adds nothing).
    pub fn add(&mut self, batch: &RecordBatch, column: &str) {
        if self.unlisted {
            return;
        }
        let Some(array) = batch.column_by_name(column) else { return };
        if !self.add_array(array) || self.values.len() > MOST_LISTED {
            self.unlisted = true;
            self.values.clear();
        }
    }

    /// Whether the values of `array` could be listed (text, or a dictionary of text).
    fn add_array(&mut self, array: &ArrayRef) -> bool {
        match array.data_type() {
            DataType::Dictionary(key, value) if matches!(value.as_ref(), DataType::Utf8) => match key.as_ref() {
                DataType::Int8 => self.add_dictionary::<Int8Type>(array),
                DataType::Int16 => self.add_dictionary::<Int16Type>(array),
                DataType::Int32 => self.add_dictionary::<Int32Type>(array),
                _ => false,
            },
            DataType::Utf8 => {
                for v in array.as_string::<i32>().iter().flatten() {
                    if !self.values.contains(v) {
                        self.values.insert(v.to_string());
                        if self.values.len() > MOST_LISTED {
                            return true;
                        }
                    }
                }
                true
            }
            _ => false,
        }
    }

    /// The values of a dictionary array that its rows use (a dictionary may hold more).
    fn add_dictionary<K: ArrowDictionaryKeyType>(&mut self, array: &ArrayRef) -> bool {
        let dict = array.as_dictionary::<K>();
        let names = dict.values().as_string::<i32>();
        let mut used = vec![false; names.len()];
        let keys = dict.keys();
        for (k, key) in keys.values().iter().enumerate() {
            if keys.is_valid(k)
                && let Some(u) = used.get_mut(key.as_usize())
            {
                *u = true;
            }
        }
        for (i, _) in used.iter().enumerate().filter(|(_, u)| **u) {
            if names.is_valid(i) {
                let v = names.value(i);
                if !self.values.contains(v) {
                    self.values.insert(v.to_string());
                }
            }
        }
        true
    }

    /// What the part lists of `column`, and a fresh set for the next part.
    pub fn take(&mut self, column: &str) -> Option<PartValues> {
        let set = std::mem::take(self);
        (!set.unlisted).then(|| PartValues { column: column.to_string(), values: set.values.into_iter().collect() })
    }
}

/// What a part of `table` made of `batches` lists (None for a table that lists nothing).
pub fn of_batches(table: &str, batches: &[RecordBatch]) -> Option<PartValues> {
    let column = listed_column(table)?;
    let mut set = ValueSet::default();
    for b in batches {
        set.add(b, column);
    }
    set.take(column)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{DictionaryArray, Int32Array, StringArray};
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;

    fn batch(array: ArrayRef) -> RecordBatch {
        let schema = Schema::new(vec![Field::new("kind", array.data_type().clone(), true)]);
        RecordBatch::try_new(Arc::new(schema), vec![array]).unwrap()
    }

    #[test]
    fn a_part_lists_the_values_its_rows_use_not_its_dictionary_s() {
        let names = StringArray::from(vec!["enter", "fork", "leave", "send"]);
        let keys = arrow::array::Int8Array::from(vec![Some(0), Some(2), None, Some(0), Some(3)]);
        let dict: ArrayRef = Arc::new(DictionaryArray::<Int8Type>::try_new(keys, Arc::new(names)).unwrap());
        let text: ArrayRef = Arc::new(StringArray::from(vec![Some("recv"), None, Some("enter")]));
        let listed = of_batches("events", &[batch(dict), batch(text)]).unwrap();
        assert_eq!(listed.column, "kind");
        assert_eq!(listed.values, ["enter", "leave", "recv", "send"]);
        assert_eq!(of_batches("calls", &[]), None);
    }

    #[test]
    fn too_many_values_or_a_column_of_numbers_list_nothing() {
        let many: ArrayRef = Arc::new(StringArray::from_iter_values((0..=MOST_LISTED).map(|i| format!("k{i}"))));
        assert_eq!(of_batches("events", &[batch(many)]), None);
        let numbers: ArrayRef = Arc::new(Int32Array::from(vec![1, 2]));
        assert_eq!(of_batches("events", &[batch(numbers)]), None);
        // A batch without the column adds nothing: the part lists no value.
        let other = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("x", DataType::Int32, false)])),
            vec![Arc::new(Int32Array::from(vec![1]))],
        )
        .unwrap();
        assert_eq!(of_batches("events", &[other]).unwrap().values, Vec::<String>::new());
    }
}
