//! A table function's arguments as one typed struct, read once when the call is planned.
//! `arguments!` names the struct's fields after the parameters the function declares; a
//! compile-time check makes every field a declared parameter and every declared parameter a
//! field (or part of a group of fields several functions share, such as the latency
//! criteria's or the level-of-detail grid's), so a declaration and the code that reads it
//! cannot drift. Each field's Rust type says how it is read (`FromArg`): a relation, text,
//! nanoseconds or an integer (as the parameter's declared type says), a number, or any of
//! them optional (None when omitted or NULL, for defaults chosen when planned).

use datafusion::common::internal_err;
use datafusion::error::Result;

use super::Args;
use crate::params::{Param, ParamDefault, Type};
use crate::relation::Relation;

/// A value read from the argument of one declared parameter.
pub trait FromArg: Sized {
    fn from_arg(a: &Args, name: &'static str) -> Result<Self>;
}

/// Several fields read together, shared by several functions' arguments: the names of the
/// parameters they read, and how.
pub trait Group: Sized {
    const NAMES: &'static [&'static str];
    fn read(a: &Args) -> Result<Self>;
}

impl FromArg for Relation {
    fn from_arg(a: &Args, name: &'static str) -> Result<Self> {
        a.relation(name)
    }
}

impl FromArg for Option<Relation> {
    fn from_arg(a: &Args, name: &'static str) -> Result<Self> {
        a.opt_relation(name)
    }
}

impl FromArg for String {
    fn from_arg(a: &Args, name: &'static str) -> Result<Self> {
        a.text(name)
    }
}

impl FromArg for Option<String> {
    fn from_arg(a: &Args, name: &'static str) -> Result<Self> {
        a.opt_text(name)
    }
}

/// An integer, or nanoseconds when the parameter is a duration: None when omitted or NULL
/// (a default chosen when planned).
impl FromArg for Option<i64> {
    fn from_arg(a: &Args, name: &'static str) -> Result<Self> {
        match a.declared(name)?.ty {
            Type::Duration { .. } => a.opt_ns(name),
            _ => a.opt_int(name),
        }
    }
}

/// An integer, or nanoseconds when the parameter is a duration, or its declared default.
impl FromArg for i64 {
    fn from_arg(a: &Args, name: &'static str) -> Result<Self> {
        let p = a.declared(name)?;
        match (Option::<i64>::from_arg(a, name)?, p.default) {
            (Some(v), _) => Ok(v),
            (None, ParamDefault::Integer(d)) => Ok(d),
            _ => internal_err!("{}: {name} has no integer default; read it as an Option", a.function),
        }
    }
}

/// A count (an integer declared at least 0), or its declared default.
impl FromArg for usize {
    fn from_arg(a: &Args, name: &'static str) -> Result<Self> {
        let v = i64::from_arg(a, name)?;
        match usize::try_from(v) {
            Ok(v) => Ok(v),
            Err(_) => internal_err!("{}: {name} is declared without a minimum of 0, got {v}", a.function),
        }
    }
}

impl FromArg for Option<usize> {
    fn from_arg(a: &Args, name: &'static str) -> Result<Self> {
        Option::<i64>::from_arg(a, name)?
            .map(|v| match usize::try_from(v) {
                Ok(v) => Ok(v),
                Err(_) => internal_err!("{}: {name} is declared without a minimum of 0, got {v}", a.function),
            })
            .transpose()
    }
}

impl FromArg for f64 {
    fn from_arg(a: &Args, name: &'static str) -> Result<Self> {
        a.float(name)
    }
}

impl FromArg for Option<f64> {
    fn from_arg(a: &Args, name: &'static str) -> Result<Self> {
        a.opt_float(name)
    }
}

/// Whether `name` is among `names`, in a constant context.
const fn among(name: &str, names: &[&str]) -> bool {
    let mut i = 0;
    while i < names.len() {
        if same(name, names[i]) {
            return true;
        }
        i += 1;
    }
    false
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Check, when compiling, that the fields `fields` and the groups' `groups` read exactly the
/// parameters `params` declares: stops the build naming the first that does not.
pub const fn check_fields(function: &str, params: &[Param], fields: &[&str], groups: &[&[&str]]) {
    let mut read: usize = 0;
    let mut i = 0;
    while i < fields.len() {
        if !declares(params, fields[i]) {
            fail(&[function, ": field ", fields[i], " of the arguments is no declared parameter"]);
        }
        read += 1;
        i += 1;
    }
    let mut g = 0;
    while g < groups.len() {
        let mut j = 0;
        while j < groups[g].len() {
            if !declares(params, groups[g][j]) {
                fail(&[function, ": ", groups[g][j], ", read by a group of the arguments, is no declared parameter"]);
            }
            read += 1;
            j += 1;
        }
        g += 1;
    }
    let mut k = 0;
    while k < params.len() {
        let name = params[k].name;
        let mut found = among(name, fields);
        let mut g = 0;
        while g < groups.len() {
            found = found || among(name, groups[g]);
            g += 1;
        }
        if !found {
            fail(&[function, ": parameter ", name, " is declared but no field of the arguments reads it"]);
        }
        k += 1;
    }
    if read != params.len() {
        fail(&[function, ": the arguments read a parameter twice"]);
    }
}

const fn declares(params: &[Param], name: &str) -> bool {
    let mut i = 0;
    while i < params.len() {
        if same(params[i].name, name) {
            return true;
        }
        i += 1;
    }
    false
}

/// Stop the build with a message made of `parts` (a constant panic takes one string).
const fn fail(parts: &[&str]) -> ! {
    let mut buf = [0u8; 256];
    let mut n = 0;
    let mut p = 0;
    while p < parts.len() {
        let bytes = parts[p].as_bytes();
        let mut i = 0;
        while i < bytes.len() && n < buf.len() {
            buf[n] = bytes[i];
            n += 1;
            i += 1;
        }
        p += 1;
    }
    let (shown, _) = buf.split_at(n);
    match core::str::from_utf8(shown) {
        Ok(message) => panic!("{}", message),
        Err(_) => panic!("the arguments do not match the declaration"),
    }
}

/// Declare a table function's arguments as a struct whose fields are its parameters, read
/// by `read(args)`; `..field: Group` reads a group of parameters several functions share.
/// The fields are checked when compiling (`check_fields`) against the declarations of the
/// functions named in parentheses, or against the list of parameters named in brackets that
/// several functions declare.
#[macro_export]
macro_rules! arguments {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident ($($function:path),+ $(,)?) {
            $($field:ident : $ty:ty,)*
            $(.. $group:ident : $gty:ty,)*
        }
    ) => {
        $crate::arguments!(@struct $(#[$meta])* $vis $name { $($field: $ty,)* $(.. $group: $gty,)* });
        $(
            const _: () = $crate::args::check_fields($function.name, $function.params, $name::FIELDS, $name::GROUPS);
        )+
    };
    // The arguments of several functions declared with one list of parameters, named by it.
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident [$params:path] {
            $($field:ident : $ty:ty,)*
            $(.. $group:ident : $gty:ty,)*
        }
    ) => {
        $crate::arguments!(@struct $(#[$meta])* $vis $name { $($field: $ty,)* $(.. $group: $gty,)* });
        const _: () = $crate::args::check_fields(stringify!($params), $params, $name::FIELDS, $name::GROUPS);
    };
    (@struct $(#[$meta:meta])* $vis:vis $name:ident { $($field:ident : $ty:ty,)* $(.. $group:ident : $gty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug)]
        $vis struct $name {
            $(pub $field: $ty,)*
            $(pub $group: $gty,)*
        }

        impl $name {
            /// The parameters the fields read.
            const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];
            /// The parameters the groups read.
            const GROUPS: &'static [&'static [&'static str]] = &[$(<$gty as $crate::args::Group>::NAMES),*];

            /// Read the arguments of a call (already checked against the declaration).
            pub fn read(a: &$crate::args::Args) -> datafusion::error::Result<Self> {
                Ok($name {
                    $($field: <$ty as $crate::args::FromArg>::from_arg(a, stringify!($field))?,)*
                    $($group: <$gty as $crate::args::Group>::read(a)?,)*
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::check_fields;
    use crate::params::{Param, ParamDefault, Type, param};

    const BUCKET_BYTES: Param = param("bucket_bytes", Type::Integer { min: 1 }, ParamDefault::Integer(50), "");
    const MAX_SAMPLES: Param = param("max_samples", Type::Integer { min: 1 }, ParamDefault::Integer(10), "");
    const PARAMS: &[Param] = &[BUCKET_BYTES, MAX_SAMPLES];

    #[test]
    fn fields_and_groups_that_read_every_parameter_once_pass() {
        check_fields("f", PARAMS, &["bucket_bytes", "max_samples"], &[]);
        check_fields("f", PARAMS, &["max_samples"], &[&["bucket_bytes"]]);
    }

    #[test]
    #[should_panic(expected = "f: field bucket_size of the arguments is no declared parameter")]
    fn a_field_that_is_no_parameter_stops() {
        check_fields("f", PARAMS, &["bucket_size", "max_samples"], &[]);
    }

    #[test]
    #[should_panic(expected = "f: parameter max_samples is declared but no field of the arguments reads it")]
    fn a_parameter_no_field_reads_stops() {
        check_fields("f", PARAMS, &["bucket_bytes"], &[]);
    }

    #[test]
    #[should_panic(expected = "f: the arguments read a parameter twice")]
    fn a_parameter_read_twice_stops() {
        check_fields("f", PARAMS, &["bucket_bytes", "max_samples"], &[&["bucket_bytes"]]);
    }
}
