//! What analyses learnt from a trace's tables, kept for the session: a trace's tables do not
//! change while it is open, so a value computed from one of them (the latency criteria of its
//! messages, the first and last time of its events) is computed once per session and
//! parameters, not by every call that needs it. The values live in a session extension
//! (`Remembered`, set by `remember_in`), found from the call's session when it is planned;
//! each is kept by the table it was computed from, held weakly, and forgotten once that table
//! is dropped (its trace detached). A session without the extension (a cluster's executor
//! planning a call again) computes them each time.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use datafusion::catalog::{Session, TableProvider};
use datafusion::prelude::SessionContext;

/// The values a session's analyses learnt from its traces' tables.
#[derive(Default)]
pub struct Remembered {
    values: Mutex<Vec<Entry>>,
}

/// A value, the table it was computed from and what of it (the parameters) it is.
struct Entry {
    table: Weak<dyn TableProvider>,
    key: String,
    value: Arc<dyn Any + Send + Sync>,
}

impl fmt::Debug for Remembered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = self.values.lock().unwrap_or_else(PoisonError::into_inner);
        let keys: Vec<&str> = values.iter().map(|e| e.key.as_str()).collect();
        f.debug_struct("Remembered").field("keys", &keys).finish()
    }
}

/// Give the session of `ctx` a place for what its analyses learn.
pub fn remember_in(ctx: &SessionContext) {
    ctx.state_ref().write().config_mut().set_extension(Arc::new(Remembered::default()));
}

impl Remembered {
    /// The session's, when it has one.
    pub fn of(session: &dyn Session) -> Option<Arc<Remembered>> {
        session.config().get_extension::<Remembered>()
    }

    /// The value kept for `table` under `key`, if any (forgetting those of dropped tables).
    pub fn get<T: Any + Send + Sync>(&self, table: &Weak<dyn TableProvider>, key: &str) -> Option<Arc<T>> {
        let mut values = self.values.lock().unwrap_or_else(PoisonError::into_inner);
        values.retain(|e| e.table.strong_count() > 0);
        let found = values.iter().find(|e| Weak::ptr_eq(&e.table, table) && e.key == key)?;
        found.value.clone().downcast::<T>().ok()
    }

    /// Keep `value`, computed from `table`, under `key`.
    pub fn keep<T: Any + Send + Sync>(&self, table: &Weak<dyn TableProvider>, key: &str, value: Arc<T>) {
        let mut values = self.values.lock().unwrap_or_else(PoisonError::into_inner);
        values.retain(|e| e.table.strong_count() > 0 && !(Weak::ptr_eq(&e.table, table) && e.key == key));
        values.push(Entry { table: table.clone(), key: key.to_string(), value });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::datasource::empty::EmptyTable;

    #[test]
    fn a_value_is_kept_by_its_table_and_key_and_forgotten_with_the_table() {
        let schema = Arc::new(arrow::datatypes::Schema::empty());
        let a: Arc<dyn TableProvider> = Arc::new(EmptyTable::new(schema.clone()));
        let b: Arc<dyn TableProvider> = Arc::new(EmptyTable::new(schema));
        let remembered = Remembered::default();
        remembered.keep(&Arc::downgrade(&a), "span", Arc::new(7_i64));
        assert_eq!(remembered.get::<i64>(&Arc::downgrade(&a), "span").as_deref(), Some(&7));
        assert!(remembered.get::<i64>(&Arc::downgrade(&a), "other").is_none());
        assert!(remembered.get::<i64>(&Arc::downgrade(&b), "span").is_none());
        assert!(remembered.get::<String>(&Arc::downgrade(&a), "span").is_none());
        let weak = Arc::downgrade(&a);
        drop(a);
        assert!(remembered.get::<i64>(&weak, "span").is_none());
        assert!(remembered.values.lock().unwrap().is_empty());
    }
}
