//! Exit codes, ordered by severity: what a run of any harness command means to a shell.

use serde::{Deserialize, Serialize};

/// Exit code: every expectation met (and, on a full run, no test UNFALSIFIED).
pub const EXIT_ALL_MET: i32 = ExitCode::AllMet.code();
/// Exit code: the tests are weak (some expectation UNMET or some test UNFALSIFIED).
pub const EXIT_WEAK: i32 = ExitCode::Weak.code();
/// Exit code: the instrument could not be trusted (a refusal, a bad catalog, a fault).
pub const EXIT_REFUSED: i32 = ExitCode::Refused.code();

/// What a harness command's exit status says, least severe first: the derived order is the
/// severity order, so [`ExitCode::worst`] (and `max`) pick the one to report when several
/// runs end differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "i32", try_from = "i32")]
pub enum ExitCode {
    /// 0: every expectation met (and, on a full run, no test UNFALSIFIED).
    AllMet,
    /// 1: the tests are weak (an expectation UNMET, a test UNFALSIFIED, an island).
    Weak,
    /// 2: the instrument could not be trusted (a refusal, bad input, a fault).
    Refused,
    /// 130: interrupted by a signal (128 + SIGINT, the shell convention); the tree was
    /// restored first.
    Interrupted,
}

impl ExitCode {
    /// The process exit status.
    pub const fn code(self) -> i32 {
        match self {
            ExitCode::AllMet => 0,
            ExitCode::Weak => 1,
            ExitCode::Refused => 2,
            ExitCode::Interrupted => 130,
        }
    }

    /// The exit code of status `code`; any status the harness does not give itself (a
    /// command's own status, a signal) ranks with [`ExitCode::Interrupted`] as the most
    /// severe, since nothing can be said about it.
    pub fn of(code: i32) -> ExitCode {
        match code {
            0 => ExitCode::AllMet,
            1 => ExitCode::Weak,
            2 => ExitCode::Refused,
            _ => ExitCode::Interrupted,
        }
    }

    /// The more severe of two (130 > 2 > 1 > 0).
    pub fn worst(self, other: ExitCode) -> ExitCode {
        self.max(other)
    }

    /// Whether a run ending so stops the runs after it (a refusal or an interruption).
    pub fn stops(self) -> bool {
        self >= ExitCode::Refused
    }
}

/// The more severe of two exit statuses as integers (130 > 2 > 1 > 0; see [`ExitCode::of`]).
pub fn worst(a: i32, b: i32) -> i32 {
    if ExitCode::of(b) > ExitCode::of(a) {
        b
    } else {
        a
    }
}

impl From<ExitCode> for i32 {
    fn from(c: ExitCode) -> i32 {
        c.code()
    }
}

impl TryFrom<i32> for ExitCode {
    type Error = String;
    fn try_from(code: i32) -> Result<ExitCode, String> {
        match code {
            0 | 1 | 2 | 130 => Ok(ExitCode::of(code)),
            c => Err(format!("{c} is not a harness exit code (0, 1, 2 or 130)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_orders_interrupted_over_untrusted_over_weak() {
        assert_eq!(worst(0, 1), 1);
        assert_eq!(worst(2, 1), 2);
        assert_eq!(worst(1, 130), 130);
        assert_eq!(worst(130, 2), 130);
        assert_eq!(ExitCode::Weak.worst(ExitCode::Refused), ExitCode::Refused);
        assert!(ExitCode::Interrupted.stops() && ExitCode::Refused.stops());
        assert!(!ExitCode::Weak.stops());
    }

    #[test]
    fn serializes_as_the_bare_integer() {
        assert_eq!(
            serde_json::to_string(&ExitCode::Interrupted).unwrap(),
            "130"
        );
        let back: ExitCode = serde_json::from_str("2").unwrap();
        assert_eq!(back, ExitCode::Refused);
        assert!(serde_json::from_str::<ExitCode>("3").is_err());
    }
}
