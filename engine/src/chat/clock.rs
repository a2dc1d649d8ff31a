//! `strftime_now(format)`: the current date and time formatted as Python's `datetime.now().strftime` formats it.
//!
//! transformers defines `strftime_now(format)` as `datetime.now().strftime(format)`: local time,
//! formatted by the C library's `strftime` (the "C" locale: `%B` is `January`, `%b` is `Jan`).
//! The same C function formats here. A [`ChatDate`] fixes the date (at midnight) so that a
//! rendered prompt can be reproduced.

use std::fmt;
use std::str::FromStr;

use minijinja::{Error, ErrorKind};

/// A calendar date that `strftime_now` reports instead of today's (time of day 00:00:00).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChatDate {
    /// Year, e.g. 2026.
    pub year: i32,
    /// Month, 1..=12.
    pub month: u32,
    /// Day of the month, 1..=31 (checked against the month's length).
    pub day: u32,
}

/// A date string that is not a valid `YYYY-MM-DD` calendar date.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid date '{text}': {reason} (expected YYYY-MM-DD)")]
pub struct BadDate {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl FromStr for ChatDate {
    type Err = BadDate;

    /// Parses `YYYY-MM-DD`.
    fn from_str(text: &str) -> Result<ChatDate, BadDate> {
        let bad = |reason| BadDate {
            text: text.to_string(),
            reason,
        };
        let parts: Vec<&str> = text.split('-').collect();
        let [y, m, d] = parts.as_slice() else {
            return Err(bad("not three dash-separated numbers"));
        };
        if y.len() != 4 || m.len() != 2 || d.len() != 2 {
            return Err(bad("the fields must have 4, 2 and 2 digits"));
        }
        let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if !(digits(y) && digits(m) && digits(d)) {
            return Err(bad("a field is not a number"));
        }
        let date = ChatDate {
            year: y.parse().map_err(|_| bad("bad year"))?,
            month: m.parse().map_err(|_| bad("bad month"))?,
            day: d.parse().map_err(|_| bad("bad day"))?,
        };
        if !(1..=12).contains(&date.month) {
            return Err(bad("the month is not 01..12"));
        }
        if date.day == 0 || date.day > days_in_month(date.year, date.month) {
            return Err(bad("the day does not exist in that month"));
        }
        Ok(date)
    }
}

impl fmt::Display for ChatDate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

fn is_leap(y: i32) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i32, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Days from 1970-01-01 to the date (proleptic Gregorian calendar).
fn days_from_civil(y: i32, m: u32, d: u32) -> i64 {
    let y = i64::from(y) - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The broken-down time `strftime` formats: the fixed date at midnight, or the local time now.
fn broken_down(date: Option<ChatDate>) -> Result<libc::tm, Error> {
    // SAFETY: `tm` is a plain C struct for which all-zero bytes are a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    match date {
        Some(d) => {
            let days = days_from_civil(d.year, d.month, d.day);
            tm.tm_year = d.year - 1900;
            tm.tm_mon = d.month as i32 - 1;
            tm.tm_mday = d.day as i32;
            tm.tm_wday = (days + 4).rem_euclid(7) as i32;
            tm.tm_yday = (days - days_from_civil(d.year, 1, 1)) as i32;
        }
        None => {
            // SAFETY: `time(NULL)` only reads the clock; `localtime_r` writes into our `tm`.
            let ok = unsafe {
                let now = libc::time(std::ptr::null_mut());
                !libc::localtime_r(&now, &mut tm).is_null()
            };
            if !ok {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "strftime_now: the local time is not available",
                ));
            }
        }
    }
    Ok(tm)
}

/// `strftime_now(format)` for the given fixed date, or for now when `None`.
///
/// Errors: a format holding a NUL byte, or one whose result exceeds 4 KiB.
pub fn strftime_now(date: Option<ChatDate>, format: &str) -> Result<String, Error> {
    if format.is_empty() {
        return Ok(String::new());
    }
    let tm = broken_down(date)?;
    let c_format = std::ffi::CString::new(format).map_err(|_| {
        Error::new(
            ErrorKind::InvalidOperation,
            "strftime_now: the format contains a NUL character",
        )
    })?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: `buf` has `buf.len()` writable bytes, the format is NUL-terminated and `tm` is a
    // valid broken-down time; strftime writes at most `buf.len()` bytes including the NUL.
    let n = unsafe { libc::strftime(buf.as_mut_ptr().cast(), buf.len(), c_format.as_ptr(), &tm) };
    if n == 0 {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("strftime_now: the format {format:?} produced no output or more than 4 KiB"),
        ));
    }
    buf.truncate(n);
    String::from_utf8(buf).map_err(|_| {
        Error::new(
            ErrorKind::InvalidOperation,
            "strftime_now: the formatted date is not UTF-8",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_dates_format_as_python_does() {
        // Python: datetime(2026, 1, 15).strftime(...)
        let d: ChatDate = "2026-01-15".parse().unwrap();
        assert_eq!(
            strftime_now(Some(d), "%d %B %Y").unwrap(),
            "15 January 2026"
        );
        assert_eq!(strftime_now(Some(d), "%d %b %Y").unwrap(), "15 Jan 2026");
        assert_eq!(
            strftime_now(Some(d), "%A %j %H:%M").unwrap(),
            "Thursday 015 00:00"
        );
        let leap: ChatDate = "2024-02-29".parse().unwrap();
        assert_eq!(
            strftime_now(Some(leap), "%a %Y-%m-%d").unwrap(),
            "Thu 2024-02-29"
        );
    }

    #[test]
    fn bad_dates_are_refused() {
        for s in [
            "2025-02-29",
            "2026-13-01",
            "2026-1-15",
            "26-01-15",
            "2026-01-xx",
            "",
        ] {
            assert!(s.parse::<ChatDate>().is_err(), "{s}");
        }
    }
}
