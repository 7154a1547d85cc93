//! The parameters of every function that measures latency against criteria (PCLVis 4.1),
//! shared by latency_criteria, message_latency, process_regions, latency_trend, attribution
//! and the dependency DAG.

use commdb_analysis::params::{Param, ParamDefault, Type, param};

/// The four parameters of every function that measures latency L against criteria
/// (PCLVis 4.1): how `latency_criteria` learns them, or a table of them.
pub const BUCKET_BYTES: Param = param(
    "bucket_bytes",
    Type::Integer { min: 1 },
    ParamDefault::Integer(50),
    "width of the message-size buckets of the criteria, in bytes",
);
pub const MAX_SAMPLES: Param = param(
    "max_samples",
    Type::Integer { min: 1 },
    ParamDefault::Integer(10000),
    "at most this many messages per bucket are sampled for its median",
);
pub const MIN_MESSAGES: Param = param(
    "min_messages",
    Type::Integer { min: 1 },
    ParamDefault::Integer(5),
    "a bucket with fewer messages gets no criterion (status 'too_few_messages'), so its messages no latency",
);
pub const CRITERIA: Param = param(
    "criteria",
    Type::Relation,
    ParamDefault::Chosen("the whole trace's"),
    "a latency_criteria-shaped relation to measure against instead of the trace's own criteria",
);
