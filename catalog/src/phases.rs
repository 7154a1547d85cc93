//! Where the time of `RawTrace::build` goes: its phases (clock correction, the stream walk,
//! message matching, the msg_id order, the gather of the `messages` columns, the collectives,
//! the conversion of the tables to Arrow; with the controlled logical clock, the derivation
//! runs twice around it), each with its wall-clock duration, in the order they ran. A phase that runs beside others on a thread of its own (the collectives, beside the
//! matching) is marked so and left out of the sum, which then adds up to the time of the build.
//! A clock read per phase; the OTF2 benchmark prints them.

use std::fmt;
use std::time::Instant;

/// One phase and its wall-clock time.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    pub name: &'static str,
    pub seconds: f64,
    /// Ran beside other phases, which its time overlaps.
    pub beside: bool,
}

/// The phases of a build, in the order they ran.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadPhases {
    phases: Vec<Phase>,
}

impl LoadPhases {
    /// Run `f` as phase `name`.
    pub fn time<T>(&mut self, name: &'static str, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.since(name, start);
        out
    }

    /// Phase `name` ran from `start` until now.
    pub fn since(&mut self, name: &'static str, start: Instant) {
        self.phases.push(Phase { name, seconds: start.elapsed().as_secs_f64(), beside: false });
    }

    /// Phase `name` took `seconds` beside the others.
    pub fn beside(&mut self, name: &'static str, seconds: f64) {
        self.phases.push(Phase { name, seconds, beside: true });
    }

    /// Append the phases of `other`.
    pub fn extend(&mut self, other: LoadPhases) {
        self.phases.extend(other.phases);
    }

    pub fn iter(&self) -> impl Iterator<Item = &Phase> {
        self.phases.iter()
    }

    /// Seconds of the phases that ran one after the other.
    pub fn total(&self) -> f64 {
        self.phases.iter().filter(|p| !p.beside).map(|p| p.seconds).sum()
    }
}

impl fmt::Display for LoadPhases {
    /// "stream walk 0.163 s, matching 0.063 s, collectives 0.033 s (beside)".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, p) in self.phases.iter().enumerate() {
            let sep = if k == 0 { "" } else { ", " };
            let beside = if p.beside { " (beside)" } else { "" };
            write!(f, "{sep}{} {:.3} s{beside}", p.name, p.seconds)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn phases_keep_their_order_and_the_sum_leaves_out_those_beside() {
        let mut p = LoadPhases::default();
        let v = p.time("walk", || {
            std::thread::sleep(Duration::from_millis(2));
            7
        });
        assert_eq!(v, 7);
        p.beside("collectives", 0.5);
        let mut q = LoadPhases::default();
        q.since("gather", Instant::now());
        p.extend(q);
        p.time("walk", || ());
        let names: Vec<&str> = p.iter().map(|x| x.name).collect();
        assert_eq!(names, ["walk", "collectives", "gather", "walk"]);
        let seconds: Vec<f64> = p.iter().map(|x| x.seconds).collect();
        assert!(seconds[0] >= 0.002);
        assert_eq!(seconds[1], 0.5);
        assert!(p.total() < 0.5, "the phase beside is not in the sum: {}", p.total());
        assert!((p.total() - seconds[0] - seconds[2] - seconds[3]).abs() < 1e-12);
        let text = p.to_string();
        assert!(text.starts_with("walk 0.00"), "{text}");
        assert!(text.contains("collectives 0.500 s (beside), gather 0.000 s"), "{text}");
    }
}
