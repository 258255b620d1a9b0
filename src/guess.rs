//! The name a typo most likely meant ("did you mean `command`?"), for manifest keys,
//! proxy.toml keys and the names typed on the command line. Pure.

/// The candidate `wanted` is most likely a typo of: one whose name starts the other's
/// (`enviroment` → `env`), else one at most two edits away, or sharing its first three
/// letters; the closest wins, the first of equals. Case is ignored.
pub fn nearest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = wanted.to_lowercase();
    candidates
        .into_iter()
        .filter(|candidate| !candidate.is_empty() && *candidate != wanted)
        .filter_map(|candidate| {
            let other = candidate.to_lowercase();
            let prefix = lower.starts_with(&other) || other.starts_with(&lower);
            let distance = edits(&lower, &other);
            // By characters: a name may be any text.
            let same_start =
                lower.chars().count() >= 3 && lower.chars().take(3).eq(other.chars().take(3));
            let rank = if prefix { 0 } else { distance };
            (prefix || distance <= 2 || same_start).then_some((rank, candidate))
        })
        .min_by_key(|(rank, _)| *rank)
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance, by characters.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let current = row[j + 1];
            row[j + 1] = if ca == *cb {
                previous
            } else {
                1 + previous.min(row[j]).min(row[j + 1])
            };
            previous = current;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_what_they_meant_and_strangers_find_nothing() {
        let keys = ["type", "command", "args", "env", "cwd"];
        assert_eq!(nearest("comand", keys), Some("command"));
        assert_eq!(nearest("enviroment", keys), Some("env"));
        assert_eq!(nearest("arg", keys), Some("args"));
        assert_eq!(nearest("zzzzzz", keys), None);
        assert_eq!(nearest("clok", ["notes", "clock", "echo"]), Some("clock"));
        assert_eq!(nearest("ech", ["notes", "clock", "echo"]), Some("echo"));
        // A name that is there is no typo; an empty candidate is no guess.
        assert_eq!(nearest("echo", ["echo"]), None);
        assert_eq!(nearest("x", [""]), None);
        assert_eq!(edits("kitten", "sitting"), 3);
    }
}
