//! The real test name nearest to a name that no target holds (`test_units` for `duration::test::test_units`).

/// The name of `real` nearest to `wanted`, `None` when `real` is empty. A real name that
/// ends in `wanted` as whole `::` segments (the test's path written without its modules)
/// comes first, the shortest such; otherwise the one at the least edit distance
/// (Levenshtein, over characters), the first listed on a tie.
pub fn nearest<'a>(wanted: &str, real: &'a [String]) -> Option<&'a str> {
    let suffix = format!("::{wanted}");
    if let Some(hit) = real
        .iter()
        .filter(|r| r.ends_with(&suffix))
        .min_by_key(|r| r.len())
    {
        return Some(hit);
    }
    real.iter()
        .min_by_key(|r| strsim::levenshtein(wanted, r))
        .map(String::as_str)
}

/// What to say of a listed test no target holds: `nearest real test: "REAL"`.
pub fn describe(wanted: &str, real: &[String]) -> String {
    match nearest(wanted, real) {
        Some(n) => format!("nearest real test: {n:?}"),
        None => "the targets hold no test".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_path_without_its_modules_finds_the_test() {
        let real = names(&[
            "duration::test::test_unit_names",
            "duration::test::test_units",
            "tests::test_units_extra",
        ]);
        assert_eq!(
            nearest("test_units", &real),
            Some("duration::test::test_units")
        );
        assert_eq!(
            nearest("test::test_units", &real),
            Some("duration::test::test_units")
        );
    }

    #[test]
    fn a_typo_finds_the_closest_spelling() {
        let real = names(&["parse::rejects_empty", "parse::accepts_hours"]);
        assert_eq!(
            nearest("parse::rejects_emtpy", &real),
            Some("parse::rejects_empty")
        );
        assert_eq!(nearest("x", &[]), None);
        assert_eq!(
            describe("parse::acepts_hours", &real),
            "nearest real test: \"parse::accepts_hours\""
        );
    }
}
