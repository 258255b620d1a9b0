//! Reading `proxy.toml` into its raw schema while collecting every problem at once: syntax
//! errors are recovered from, and each key serde refuses (unknown, wrong type, missing) is
//! reported and taken out before trying again, so one run names every mistake.

use serde::Deserialize;
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::checker::Checker;
use super::raw::RawConfig;

/// More refusals than this in one file, and the rest are not looked for.
const MAX_ROUNDS: usize = 100;

/// One step into the document: a table key or an array index.
enum Step {
    Key(String),
    Index(usize),
}

/// The file as the raw schema, minus whatever was refused (each refusal is a problem in
/// `checker`); `None` when nothing usable is left.
pub(super) fn read(text: &str, checker: &mut Checker) -> Option<RawConfig> {
    let (mut document, errors) = DeTable::parse_recoverable(text);
    for error in &errors {
        let offset = error.span().map_or(0, |span| span.start);
        checker.problem(offset, error.message().trim().to_string());
    }
    let mut last_offset = None;
    for _ in 0..MAX_ROUNDS {
        let deserializer = toml::de::Deserializer::from(document.clone());
        let error = match RawConfig::deserialize(deserializer) {
            Ok(raw) => return Some(raw),
            Err(error) => error,
        };
        let offset = error.span().map_or(0, |span| span.start);
        let path = find(document.get_ref(), offset);
        checker.problem(offset, say(error.message(), path.as_deref()));
        // The same place refused twice: taking things out does not help; stop here.
        if last_offset == Some(offset) {
            return None;
        }
        last_offset = Some(offset);
        if !path.is_some_and(|path| remove(document.get_mut(), &path)) {
            return None;
        }
    }
    None
}

/// serde's message, led by the key it is about (unknown fields name themselves), in words.
fn say(message: &str, path: Option<&[Step]>) -> String {
    let message = message
        .trim()
        .replace("expected i64", "expected a whole number")
        .replace("expected a boolean", "expected true or false");
    match path {
        Some(path) if !message.starts_with("unknown field") => {
            let mut key = String::new();
            for step in path {
                match step {
                    Step::Key(k) if key.is_empty() => key.push_str(k),
                    Step::Key(k) => {
                        key.push('.');
                        key.push_str(k);
                    }
                    Step::Index(i) => key.push_str(&format!("[{i}]")),
                }
            }
            format!("{key}: {message}")
        }
        _ => match guess(&message) {
            Some(near) => format!("{message}; did you mean `{near}`?"),
            None => message,
        },
    }
}

/// For serde's "unknown field `comand`, expected one of `type`, `command`, …": the expected
/// key the unknown one is most likely a typo of.
fn guess(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    let (field, expected) = rest.split_once('`')?;
    crate::guess::nearest(field, expected.split('`').skip(1).step_by(2))
}

/// The path to the innermost key or item whose key or value holds `offset`.
fn find(table: &DeTable<'_>, offset: usize) -> Option<Vec<Step>> {
    for (key, value) in table.iter() {
        let step = || Step::Key(key.get_ref().to_string());
        if key.span().contains(&offset) {
            return Some(vec![step()]);
        }
        if let Some(mut inner) = find_in_value(value, offset) {
            inner.insert(0, step());
            return Some(inner);
        }
        if value.span().contains(&offset) {
            return Some(vec![step()]);
        }
    }
    None
}

fn find_in_value(value: &Spanned<DeValue<'_>>, offset: usize) -> Option<Vec<Step>> {
    match value.get_ref() {
        DeValue::Table(table) => find(table, offset),
        DeValue::Array(items) => items.iter().enumerate().find_map(|(index, item)| {
            let mut inner = find_in_value(item, offset)
                .or_else(|| item.span().contains(&offset).then(Vec::new))?;
            inner.insert(0, Step::Index(index));
            Some(inner)
        }),
        _ => None,
    }
}

/// Take out what `path` leads to; whether something was taken out.
fn remove(table: &mut DeTable<'_>, path: &[Step]) -> bool {
    match path {
        [Step::Key(key)] => {
            let found = table
                .iter()
                .find(|(k, _)| k.get_ref() == key)
                .map(|(k, _)| k.clone());
            found.is_some_and(|k| table.remove(&k).is_some())
        }
        [Step::Key(key), rest @ ..] => {
            let Some((_, value)) = table.iter_mut().find(|(k, _)| k.get_ref() == key) else {
                return false;
            };
            remove_in_value(value.get_mut(), rest)
        }
        _ => false,
    }
}

fn remove_in_value(value: &mut DeValue<'_>, path: &[Step]) -> bool {
    match (value, path) {
        (DeValue::Table(table), _) => remove(table, path),
        (DeValue::Array(items), [Step::Index(index)]) if *index < items.len() => {
            // `DeArray` has no `remove`: rebuild it without that item.
            let mut kept = toml::de::DeArray::new();
            for (i, item) in items.iter().enumerate() {
                if i != *index {
                    kept.push(item.clone());
                }
            }
            *items = kept;
            true
        }
        (DeValue::Array(items), [Step::Index(index), rest @ ..]) => items
            .get_mut(*index)
            .is_some_and(|item| remove_in_value(item.get_mut(), rest)),
        _ => false,
    }
}
