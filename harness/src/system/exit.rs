//! Exit codes, ordered by severity: what a run of any harness command means to a shell.

use std::fmt;

use serde::{Deserialize, Serialize};

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

    /// The more severe of two (130 > 2 > 1 > 0).
    pub fn worst(self, other: ExitCode) -> ExitCode {
        self.max(other)
    }

    /// Whether a run ending so stops the runs after it (a refusal or an interruption).
    pub fn stops(self) -> bool {
        self >= ExitCode::Refused
    }
}

/// Reports and messages print the bare integer (`exit 2`).
impl fmt::Display for ExitCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.code(), f)
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
            0 => Ok(ExitCode::AllMet),
            1 => Ok(ExitCode::Weak),
            2 => Ok(ExitCode::Refused),
            130 => Ok(ExitCode::Interrupted),
            c => Err(format!("{c} is not a harness exit code (0, 1, 2 or 130)")),
        }
    }
}

/// How a harness process ends: with the harness's own verdict, or (`harness lock run`) with
/// the exit status of the command it ran, passed through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessExit {
    /// The harness's own verdict.
    Verdict(ExitCode),
    /// `harness lock run`: its command's exit status (128 + N when signal N ended it).
    PassThrough(i32),
}

impl ProcessExit {
    /// The process exit status.
    pub fn status(self) -> i32 {
        match self {
            ProcessExit::Verdict(code) => code.code(),
            ProcessExit::PassThrough(status) => status,
        }
    }
}

impl From<ExitCode> for ProcessExit {
    fn from(code: ExitCode) -> ProcessExit {
        ProcessExit::Verdict(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_orders_interrupted_over_untrusted_over_weak() {
        use ExitCode::{AllMet, Interrupted, Refused, Weak};
        assert_eq!(AllMet.worst(Weak), Weak);
        assert_eq!(Refused.worst(Weak), Refused);
        assert_eq!(Weak.worst(Interrupted), Interrupted);
        assert_eq!(Interrupted.worst(Refused), Interrupted);
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
