//! Minibatch-size schedules: one size per epoch, as SGD's `minibatchSize = 128*2:1024`
//! (128 for two epochs, then 1024 for every later one; seed 003's `[128]*2 + [1024]`).

use std::fmt;
use std::str::FromStr;

/// Minibatch sizes by epoch; the last size holds for every later epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MbSchedule {
    /// (size in samples, epochs it lasts), in order.
    steps: Vec<(u64, u64)>,
}

impl MbSchedule {
    /// One size for every epoch.
    pub fn constant(size: u64) -> Self {
        MbSchedule {
            steps: vec![(size, 1)],
        }
    }

    /// The largest size of the schedule.
    pub fn largest(&self) -> u64 {
        self.steps.iter().map(|&(size, _)| size).max().unwrap_or(1)
    }

    /// The size for epoch `epoch` (0-based).
    pub fn size_for_epoch(&self, epoch: u64) -> u64 {
        let mut first = 0u64;
        for &(size, epochs) in &self.steps {
            first = first.saturating_add(epochs);
            if epoch < first {
                return size;
            }
        }
        self.steps.last().map_or(1, |&(size, _)| size)
    }
}

/// Why a schedule could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleError(pub String);

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::error::Error for ScheduleError {}

impl FromStr for MbSchedule {
    type Err = ScheduleError;

    /// `SIZE[*EPOCHS][:SIZE[*EPOCHS]]...`; sizes and epoch counts are positive integers.
    fn from_str(text: &str) -> Result<Self, ScheduleError> {
        let bad = |why: &str| {
            ScheduleError(format!(
                "invalid minibatch size '{text}': {why} (expected a number of samples or a \
                 schedule such as 128*2:1024)"
            ))
        };
        let positive = |s: &str, what: &str| -> Result<u64, ScheduleError> {
            match s.trim().parse::<u64>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(bad(&format!(
                    "{what} '{}' is not a positive integer",
                    s.trim()
                ))),
            }
        };
        let mut steps = Vec::new();
        for step in text.split(':') {
            let (size, epochs) = match step.split_once('*') {
                Some((size, epochs)) => (
                    positive(size, "the size")?,
                    positive(epochs, "the epoch count")?,
                ),
                None => (positive(step, "the size")?, 1),
            };
            steps.push((size, epochs));
        }
        Ok(MbSchedule { steps })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_003_schedule_and_errors() {
        let s: MbSchedule = "128*2:1024".parse().unwrap();
        let sizes: Vec<u64> = (0..5).map(|e| s.size_for_epoch(e)).collect();
        assert_eq!(sizes, [128, 128, 1024, 1024, 1024]);
        assert_eq!(s.largest(), 1024);
        let s: MbSchedule = "512:64*3:256".parse().unwrap();
        assert_eq!(s.largest(), 512);
        let s: MbSchedule = "64".parse().unwrap();
        assert_eq!(s.size_for_epoch(9), 64);
        let s: MbSchedule = "1:2*3:5".parse().unwrap();
        let sizes: Vec<u64> = (0..6).map(|e| s.size_for_epoch(e)).collect();
        assert_eq!(sizes, [1, 2, 2, 2, 5, 5]);
        assert_eq!(MbSchedule::constant(7).size_for_epoch(3), 7);
        for bad in ["", "0", "12*0", "a", "12:", "-3", "1*2*3", "12*"] {
            let e = bad.parse::<MbSchedule>().unwrap_err();
            assert!(e.0.contains("invalid minibatch size"), "{bad}: {e}");
        }
    }
}
