//! `sum()` of integers that fails on overflow, as in PostgreSQL: DataFusion 55 sums Int64 and
//! UInt64 with wrapping additions (`SELECT sum(9223372036854775807) FROM t` of two rows gives
//! -2). The analyzer rule of `checked` turns every `sum(x)` of a 64-bit integer (after type
//! coercion; DISTINCT sums stay DataFusion's) into `checked_sum(x)`, which adds with Arrow's
//! checked kernels and fails with `integer overflow`; as an aggregate it keeps DataFusion's
//! primitive group accumulator, whose additions mark an overflow that the next batch reports;
//! in a window it also subtracts the rows that leave the frame.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arrow::array::{Array, ArrayRef, ArrowNativeTypeOp, ArrowNumericType, AsArray, BooleanArray};
use arrow::datatypes::{DataType, Field, FieldRef, Int64Type, UInt64Type};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::error::DataFusionError;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::{AggregateOrderSensitivity, format_state_name};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, EmitTo, GroupsAccumulator, ReversedUDAF, Signature, Volatility,
};
use datafusion_functions_aggregate_common::aggregate::groups_accumulator::prim_op::PrimitiveGroupsAccumulator;

/// The name the rule writes into plans.
pub const NAME: &str = "checked_sum";

/// The checked sum as an aggregate function.
pub fn udaf() -> AggregateUDF {
    AggregateUDF::new_from_impl(CheckedSum {
        signature: Signature::uniform(1, vec![DataType::Int64, DataType::UInt64], Volatility::Immutable),
    })
}

/// Whether `sum` of a value of `data_type` is checked (a 64-bit integer, as DataFusion's sum
/// coerces every integer to).
pub fn applies_to(data_type: &DataType) -> bool {
    matches!(data_type, DataType::Int64 | DataType::UInt64)
}

fn overflow(name: &str, data_type: &DataType) -> DataFusionError {
    DataFusionError::Execution(format!(
        "integer overflow: {name} does not fit {data_type}; sum a cast to DOUBLE or DECIMAL(38, 0) for a wider result"
    ))
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct CheckedSum {
    signature: Signature,
}

impl AggregateUDFImpl for CheckedSum {
    fn name(&self) -> &str {
        NAME
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        Ok(args[0].clone())
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let (data_type, name) = (args.return_field.data_type().clone(), args.name.to_string());
        match data_type {
            DataType::Int64 => Ok(Box::new(SumOf::<Int64Type>::new(data_type, name))),
            DataType::UInt64 => Ok(Box::new(SumOf::<UInt64Type>::new(data_type, name))),
            other => exec_err!("{NAME}: expected Int64 or UInt64, got {other}"),
        }
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(vec![Arc::new(Field::new(format_state_name(args.name, "sum"), args.return_field.data_type().clone(), true))])
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        !args.is_distinct
    }

    fn create_groups_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn GroupsAccumulator>> {
        let (data_type, name) = (args.return_field.data_type().clone(), args.name.to_string());
        let overflowed = Arc::new(AtomicBool::new(false));
        let mark = overflowed.clone();
        let inner: Box<dyn GroupsAccumulator> = match data_type {
            DataType::Int64 => Box::new(PrimitiveGroupsAccumulator::<Int64Type, _>::new(&data_type, move |x, y| {
                *x = x.add_checked(y).unwrap_or_else(|_| {
                    mark.store(true, Ordering::Relaxed);
                    x.add_wrapping(y)
                })
            })),
            DataType::UInt64 => Box::new(PrimitiveGroupsAccumulator::<UInt64Type, _>::new(&data_type, move |x, y| {
                *x = x.add_checked(y).unwrap_or_else(|_| {
                    mark.store(true, Ordering::Relaxed);
                    x.add_wrapping(y)
                })
            })),
            other => return exec_err!("{NAME}: expected Int64 or UInt64, got {other}"),
        };
        Ok(Box::new(Groups { inner, overflowed, name, data_type }))
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.accumulator(args)
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        ReversedUDAF::Identical
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        AggregateOrderSensitivity::Insensitive
    }
}

/// The sum of one group (or one window frame): NULL until a value comes.
struct SumOf<T: ArrowNumericType> {
    sum: T::Native,
    /// Values summed (less those retracted); 0: the sum is NULL.
    count: u64,
    data_type: DataType,
    name: String,
}

impl<T: ArrowNumericType> std::fmt::Debug for SumOf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SumOf").field("name", &self.name).field("count", &self.count).finish_non_exhaustive()
    }
}

impl<T: ArrowNumericType> SumOf<T> {
    fn new(data_type: DataType, name: String) -> Self {
        SumOf { sum: T::Native::default(), count: 0, data_type, name }
    }

    fn add(&mut self, values: &ArrayRef, sign_plus: bool) -> Result<()> {
        let array = values.as_primitive::<T>();
        let Some(part) = arrow::compute::sum_checked(array).map_err(|_| overflow(&self.name, &self.data_type))? else {
            return Ok(());
        };
        let counted = (array.len() - array.null_count()) as u64;
        self.sum = if sign_plus { self.sum.add_checked(part) } else { self.sum.sub_checked(part) }
            .map_err(|_| overflow(&self.name, &self.data_type))?;
        self.count = if sign_plus { self.count + counted } else { self.count.saturating_sub(counted) };
        Ok(())
    }
}

impl<T: ArrowNumericType> Accumulator for SumOf<T> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(&values[0], true)
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        self.add(&values[0], false)
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.add(&states[0], true)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.evaluate()?])
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let value = (self.count > 0).then_some(self.sum);
        ScalarValue::new_primitive::<T>(value, &self.data_type)
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self) + self.name.capacity()
    }
}

/// DataFusion's primitive group accumulator with checked additions: an overflow in a batch
/// fails that batch.
struct Groups {
    inner: Box<dyn GroupsAccumulator>,
    overflowed: Arc<AtomicBool>,
    name: String,
    data_type: DataType,
}

impl std::fmt::Debug for Groups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Groups").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Groups {
    fn check(&self) -> Result<()> {
        if self.overflowed.load(Ordering::Relaxed) { Err(overflow(&self.name, &self.data_type)) } else { Ok(()) }
    }
}

impl GroupsAccumulator for Groups {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.inner.update_batch(values, group_indices, opt_filter, total_num_groups)?;
        self.check()
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        self.check()?;
        self.inner.evaluate(emit_to)
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        self.check()?;
        self.inner.state(emit_to)
    }

    fn merge_batch(&mut self, values: &[ArrayRef], group_indices: &[usize], total_num_groups: usize) -> Result<()> {
        self.inner.merge_batch(values, group_indices, total_num_groups)?;
        self.check()
    }

    fn convert_to_state(&self, values: &[ArrayRef], opt_filter: Option<&BooleanArray>) -> Result<Vec<ArrayRef>> {
        self.inner.convert_to_state(values, opt_filter)
    }

    fn size(&self) -> usize {
        self.inner.size()
    }
}
