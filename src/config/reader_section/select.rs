//! Finding the reader section of a document (SPEC §7.5): an explicit dotted path (to a
//! reader, or to a section whose own `reader` is used, else the nearest one of the sections
//! enclosing it along the path), else a
//! top-level `reader`, else the reader of the section(s) named by `command`, else the only
//! `reader` found anywhere. The search is syntactic, so unrelated members are never evaluated.

use crate::config::brainscript::{Error, Evaluator, ExprKind, Pos, Record, RecordValue, Value};

/// Why no single reader section could be chosen.
pub(crate) enum SelectError {
    /// An error at a position of the text.
    Script(Error),
    /// An error about the document as a whole.
    Whole(String),
}

impl From<Error> for SelectError {
    fn from(err: Error) -> Self {
        SelectError::Script(err)
    }
}

/// A reader record found by its dotted path.
struct Candidate {
    path: Vec<String>,
    pos: Pos,
}

impl Candidate {
    fn dotted(&self) -> String {
        self.path.join(".")
    }
}

/// Chooses the reader record.
pub(crate) fn select<'a>(
    eval: &mut Evaluator<'a>,
    section: Option<&str>,
) -> Result<RecordValue<'a>, SelectError> {
    match section {
        Some(path) => by_path(eval, path),
        None => automatic(eval),
    }
}

fn as_record<'a>(value: Value<'a>, what: &str, pos: Pos) -> Result<RecordValue<'a>, SelectError> {
    match value {
        Value::Record(record) => Ok(record),
        other => Err(SelectError::Script(Error::new(
            pos,
            format!("'{what}' is {}, not a record", other.type_name()),
        ))),
    }
}

/// The record of member `name` of `record`, if there is such a member.
fn member_record<'a>(
    eval: &mut Evaluator<'a>,
    record: &RecordValue<'a>,
    name: &str,
    what: &str,
) -> Result<Option<RecordValue<'a>>, SelectError> {
    match record.find(name)? {
        Some(found) => {
            let pos = found.member.value.pos;
            let value = eval.eval_member(&found)?;
            as_record(value, what, pos).map(Some)
        }
        None => Ok(None),
    }
}

/// Keys only a reader section has (an action's section may well have a `file`).
const READER_ONLY_KEYS: [&str; 2] = ["readerType", "deserializers"];

/// Whether `record` holds any of `keys`.
fn holds_any(record: &Record, keys: &[&str]) -> bool {
    keys.iter().any(|key| !record.find(key).is_empty())
}

/// Whether a record is itself a reader section rather than a command holding one.
fn looks_like_reader(record: &Record) -> bool {
    holds_any(record, &READER_ONLY_KEYS) || holds_any(record, &["input", "file"])
}

fn by_path<'a>(eval: &mut Evaluator<'a>, path: &str) -> Result<RecordValue<'a>, SelectError> {
    let segments: Vec<&str> = path.split('.').map(str::trim).collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(SelectError::Whole(format!("invalid section path '{path}'")));
    }
    let mut current = eval.root();
    // The records along the path, the root first: the sections enclosing `current`.
    let mut enclosing = Vec::new();
    let mut walked: Vec<&str> = Vec::new();
    for segment in &segments {
        walked.push(segment);
        let what = walked.join(".");
        let next = member_record(eval, &current, segment, &what)?.ok_or_else(|| {
            SelectError::Whole(format!("section '{path}' not found: there is no '{what}'"))
        })?;
        enclosing.push(std::mem::replace(&mut current, next));
    }
    // A record inside a reader section (`reader.input`, `reader.input.x`) is neither a reader
    // nor an action's section, whatever its members are called. (A reader section here: one
    // called `reader`, or with a key only a reader has.)
    if let Some(depth) = (1..enclosing.len()).find(|&depth| {
        segments[depth - 1].eq_ignore_ascii_case("reader")
            || holds_any(enclosing[depth].record(), &READER_ONLY_KEYS)
    }) {
        return Err(SelectError::Whole(format!(
            "section '{path}' is inside the reader section '{}', not a section holding one",
            segments[..depth].join(".")
        )));
    }
    let is_reader = segments
        .last()
        .is_some_and(|s| s.eq_ignore_ascii_case("reader"));
    if is_reader {
        return Ok(current);
    }
    if let Some(reader) = member_record(eval, &current, "reader", &format!("{path}.reader"))? {
        return Ok(reader);
    }
    if looks_like_reader(current.record()) {
        return Ok(current);
    }
    // CNTK's actions read `reader` from their section through ConfigParameters, whose lookup
    // goes on through the enclosing sections (`Config.h`, `TryFind`), so a section without a
    // reader of its own uses the nearest enclosing one: enclosing along the path given.
    for (depth, record) in enclosing.iter().enumerate().rev() {
        let what = match depth {
            0 => "reader".to_string(),
            _ => format!("{}.reader", segments[..depth].join(".")),
        };
        if let Some(reader) = member_record(eval, record, "reader", &what)? {
            return Ok(reader);
        }
    }
    Err(SelectError::Whole(format!(
        "section '{path}' holds no 'reader' and is not a reader section"
    )))
}

fn automatic<'a>(eval: &mut Evaluator<'a>) -> Result<RecordValue<'a>, SelectError> {
    let root = eval.root();
    if let Some(reader) = member_record(eval, &root, "reader", "reader")? {
        return Ok(reader);
    }
    let mut from_commands: Vec<Candidate> = Vec::new();
    for name in command_names(root.record()) {
        if let Some(found) = root.find(&name)? {
            if let ExprKind::Record(section) = &found.member.value.kind {
                let reader = section.find("reader").first().map(|&(_, reader)| reader);
                // A section named twice (`test:test`) names one reader.
                let new = reader.filter(|r| from_commands.iter().all(|c| c.pos != r.pos));
                if let Some(reader) = new {
                    from_commands.push(Candidate {
                        path: vec![found.member.name.clone(), reader.name.clone()],
                        pos: reader.pos,
                    });
                }
            }
        }
    }
    let candidates = if from_commands.is_empty() {
        let mut all = Vec::new();
        find_readers(root.record(), &mut Vec::new(), &mut all);
        all
    } else {
        from_commands
    };
    match candidates.as_slice() {
        [] => Err(SelectError::Whole(
            "no reader section found: expected a record named 'reader'".to_string(),
        )),
        [only] => {
            let dotted = only.dotted();
            let mut current = root;
            for segment in &only.path {
                current = member_record(eval, &current, segment, &dotted)?.ok_or_else(|| {
                    SelectError::Whole(format!("reader section '{dotted}' vanished"))
                })?;
            }
            Ok(current)
        }
        several => {
            let list: Vec<String> = several
                .iter()
                .map(|c| format!("{} ({})", c.dotted(), c.pos))
                .collect();
            Err(SelectError::Whole(format!(
                "several reader sections found: {}; choose one with a section path (--section)",
                list.join(", ")
            )))
        }
    }
}

/// The section names of a top-level `command` (`train`, `"train"`, `train:test`,
/// `"train:test"`), read from the syntax without evaluating anything.
fn command_names(root: &Record) -> Vec<String> {
    let Some((_, command)) = root.find("command").into_iter().next() else {
        return Vec::new();
    };
    let items = match &command.value.kind {
        ExprKind::Array(items) => items.iter().collect(),
        _ => vec![&command.value],
    };
    let mut names = Vec::new();
    for item in items {
        match &item.kind {
            ExprKind::Ident(name) => names.push(name.clone()),
            ExprKind::Str(text) => names.extend(
                text.split(':')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string),
            ),
            _ => {}
        }
    }
    names
}

/// Every member named `reader` reachable through members whose values are record literals.
fn find_readers(record: &Record, path: &mut Vec<String>, out: &mut Vec<Candidate>) {
    for member in &record.members {
        path.push(member.name.clone());
        if member.name.eq_ignore_ascii_case("reader") {
            out.push(Candidate {
                path: path.clone(),
                pos: member.pos,
            });
        } else if let ExprKind::Record(inner) = &member.value.kind {
            find_readers(inner, path, out);
        }
        path.pop();
    }
}
