//! Lazy evaluator of immediate BrainScript values.
//!
//! Nothing is evaluated until asked for: the caller requests a member of a record, and only
//! the expressions that member depends on are evaluated (each member at most once; results
//! are cached). Names are searched outward through the enclosing records, in any declaration
//! order; `r.x` looks only inside `r`. Names match case-insensitively, an exact match winning.
//! A member that depends on itself is a cycle error listing the chain. Constructs that only
//! make sense in a network (calls, lambdas, `new`, ...) are errors when, and only when, they
//! are evaluated.
//!
//! Caching by (record, member) is sound because a record literal is only instantiated in
//! one scope: functions, which could instantiate a record body once per call, are never
//! applied.

use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

use super::ast::{BinaryOp, ChainLink, Expr, ExprKind, Member, Record, UnaryOp};
use super::error::{Error, Pos};
use super::parser::include_error;
use super::MAX_DEPTH;

/// An evaluated immediate value.
#[derive(Clone, Debug)]
pub enum Value<'a> {
    /// A number (always a double).
    Number(f64),
    /// A string.
    Str(String),
    /// A boolean.
    Bool(bool),
    /// A record, whose members are evaluated on demand.
    Record(RecordValue<'a>),
    /// An array (built with `:`).
    Array(Vec<Value<'a>>),
}

impl Value<'_> {
    /// The type's name, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Number(_) => "a number",
            Value::Str(_) => "a string",
            Value::Bool(_) => "a boolean",
            Value::Record(_) => "a record",
            Value::Array(_) => "an array",
        }
    }
}

struct Scope<'a> {
    record: &'a Record,
    parent: Option<Rc<Scope<'a>>>,
}

/// A record together with the records that enclose it (where names are searched outward).
#[derive(Clone)]
pub struct RecordValue<'a> {
    scope: Rc<Scope<'a>>,
}

impl<'a> RecordValue<'a> {
    fn new(record: &'a Record, parent: Option<Rc<Scope<'a>>>) -> Self {
        RecordValue {
            scope: Rc::new(Scope { record, parent }),
        }
    }

    /// The record's syntax.
    pub fn record(&self) -> &'a Record {
        self.scope.record
    }

    /// Position of the record's opening bracket.
    pub fn pos(&self) -> Pos {
        self.scope.record.pos
    }

    /// The enclosing record, if any.
    pub fn parent(&self) -> Option<RecordValue<'a>> {
        self.scope
            .parent
            .as_ref()
            .map(|p| RecordValue { scope: p.clone() })
    }

    /// The member called `name` (case-insensitive, an exact match first), in this record only.
    /// Several case-insensitive matches without an exact one is an error.
    /// A record with an `include` fails where it lacks the name: the included text, which is
    /// not read, might define it.
    pub fn find(&self, name: &str) -> Result<Option<MemberRef<'a>>, Error> {
        let record = self.scope.record;
        let found = record.find(name);
        match found.as_slice() {
            [] => match record.include {
                Some(at) => Err(include_error(at)),
                None => Ok(None),
            },
            [(index, member), rest @ ..] => {
                if member.name != name {
                    if let Some((_, other)) = rest.first() {
                        return Err(Error::new(
                            other.pos,
                            format!(
                                "'{name}' is ambiguous: '{}' ({}) and '{}' ({}) differ only in case",
                                member.name, member.pos, other.name, other.pos
                            ),
                        ));
                    }
                }
                Ok(Some(MemberRef {
                    owner: self.clone(),
                    member,
                    index: *index,
                }))
            }
        }
    }

    /// The member called `name` in this record or, failing that, in the nearest enclosing
    /// record that has one, by [`find`](Self::find)'s case-insensitive rule: how the reader
    /// looks up its parameter keys. A reference in an expression is resolved by
    /// [`resolve`](Self::resolve) instead.
    pub fn find_outward(&self, name: &str) -> Result<Option<MemberRef<'a>>, Error> {
        let mut current = Some(self.clone());
        while let Some(record) = current {
            if let Some(found) = record.find(name)? {
                return Ok(Some(found));
            }
            current = record.parent();
        }
        Ok(None)
    }
}

impl<'a> RecordValue<'a> {
    /// The member that the name `name`, written in an expression inside this record, refers
    /// to: the nearest member spelled exactly `name`, searched outward through every
    /// enclosing record, since BrainScript names are case-sensitive (CNTK's `ConfigRecord`
    /// keeps its members in a plain `std::map`). Only when no record spells it so, the
    /// member [`find_outward`](Self::find_outward) finds ignoring case.
    pub fn resolve(&self, name: &str) -> Result<Option<MemberRef<'a>>, Error> {
        let mut current = Some(self.clone());
        while let Some(record) = current {
            let members = &record.record().members;
            if let Some(index) = members.iter().position(|m| m.name == name) {
                return Ok(Some(MemberRef {
                    member: &members[index],
                    owner: record,
                    index,
                }));
            }
            if let Some(at) = record.record().include {
                if record.record().find(name).is_empty() {
                    return Err(include_error(at));
                }
            }
            current = record.parent();
        }
        self.find_outward(name)
    }
}

impl fmt::Debug for RecordValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RecordValue(at {})", self.pos())
    }
}

/// A member found in a record, ready to be evaluated.
#[derive(Clone, Debug)]
pub struct MemberRef<'a> {
    /// The record holding the member.
    pub owner: RecordValue<'a>,
    /// The member's syntax.
    pub member: &'a Member,
    index: usize,
}

/// A member under evaluation, for cycle detection.
struct Active {
    record: usize,
    index: usize,
    name: String,
    pos: Pos,
}

/// Evaluates members of one document on demand.
pub struct Evaluator<'a> {
    root: &'a Record,
    cache: HashMap<(usize, usize), Value<'a>>,
    active: Vec<Active>,
    depth: usize,
}

#[inline(never)]
fn too_deep(pos: Pos) -> Error {
    Error::new(
        pos,
        format!("evaluation nested deeper than {MAX_DEPTH} levels"),
    )
}

fn unsupported(pos: Pos, what: impl fmt::Display) -> Error {
    Error::new(
        pos,
        format!("cannot evaluate {what}: only immediate values (numbers, strings, booleans, records, arrays) are supported here"),
    )
}

impl<'a> Evaluator<'a> {
    /// An evaluator for the document whose top-level record is `root`.
    pub fn new(root: &'a Record) -> Self {
        Evaluator {
            root,
            cache: HashMap::new(),
            active: Vec::new(),
            depth: 0,
        }
    }

    /// The document's top-level record.
    pub fn root(&self) -> RecordValue<'a> {
        RecordValue::new(self.root, None)
    }

    /// Evaluates the member `name` of `record` (no outward search); `None` if there is none.
    pub fn get(
        &mut self,
        record: &RecordValue<'a>,
        name: &str,
    ) -> Result<Option<Value<'a>>, Error> {
        match record.find(name)? {
            Some(found) => self.eval_member(&found).map(Some),
            None => Ok(None),
        }
    }

    /// Evaluates the name `name` as seen from inside `record`: its own member, or the nearest
    /// enclosing record's (see [`RecordValue::resolve`]); `None` if no record defines it.
    pub fn lookup(
        &mut self,
        record: &RecordValue<'a>,
        name: &str,
    ) -> Result<Option<Value<'a>>, Error> {
        match record.resolve(name)? {
            Some(found) => self.eval_member(&found).map(Some),
            None => Ok(None),
        }
    }

    /// Evaluates a found member (once; later calls return the cached value).
    pub fn eval_member(&mut self, found: &MemberRef<'a>) -> Result<Value<'a>, Error> {
        let key = (found.owner.record().id, found.index);
        if let Some(value) = self.cache.get(&key) {
            return Ok(value.clone());
        }
        let member = found.member;
        if let Some(start) = self
            .active
            .iter()
            .position(|a| a.record == key.0 && a.index == key.1)
        {
            return Err(self.cycle(start, member));
        }
        self.active.push(Active {
            record: key.0,
            index: key.1,
            name: member.name.clone(),
            pos: member.pos,
        });
        let result = self.eval(&member.value, &found.owner);
        self.active.pop();
        let value = result?;
        self.cache.insert(key, value.clone());
        Ok(value)
    }

    /// The error for a member that depends on itself; `start` is its place in `active`.
    #[inline(never)]
    fn cycle(&self, start: usize, member: &Member) -> Error {
        let chain: Vec<String> = self
            .active
            .iter()
            .skip(start)
            .map(|a| format!("{} ({})", a.name, a.pos))
            .chain(std::iter::once(format!("{} ({})", member.name, member.pos)))
            .collect();
        Error::new(member.pos, format!("cycle: {}", chain.join(" -> ")))
    }

    /// Evaluates an expression with `scope` as the innermost enclosing record.
    pub fn eval(&mut self, expr: &'a Expr, scope: &RecordValue<'a>) -> Result<Value<'a>, Error> {
        self.depth += 1;
        let result = if self.depth > MAX_DEPTH {
            Err(too_deep(expr.pos))
        } else {
            self.eval_inner(expr, scope)
        };
        self.depth -= 1;
        result
    }

    fn eval_inner(&mut self, expr: &'a Expr, scope: &RecordValue<'a>) -> Result<Value<'a>, Error> {
        match &expr.kind {
            ExprKind::Number(n) => Ok(Value::Number(*n)),
            ExprKind::Str(s) => Ok(Value::Str(s.clone())),
            ExprKind::Bool(b) => Ok(Value::Bool(*b)),
            ExprKind::Ident(name) => self.name(name, expr.pos, scope),
            ExprKind::Record(record) => Ok(Value::Record(RecordValue::new(
                record,
                Some(scope.scope.clone()),
            ))),
            ExprKind::Array(items) => self.array(items, scope),
            ExprKind::Unary(op, operand) => self.unary(*op, operand, expr.pos, scope),
            ExprKind::Chain(first, links) => self.chain(first, links, scope),
            ExprKind::If(cond, then, otherwise) => self.conditional(cond, then, otherwise, scope),
            ExprKind::Member(target, name, name_pos) => self.member(target, name, *name_pos, scope),
            ExprKind::Index(target, index) => self.index(target, index, expr.pos, scope),
            ExprKind::Unparsed(error) => Err((**error).clone()),
            _ => Err(Self::unsupported(expr)),
        }
    }

    // The helpers below are kept out of line so that the frames of the recursive path
    // stay small, even in unoptimized builds.

    #[inline(never)]
    fn name(&mut self, name: &str, pos: Pos, scope: &RecordValue<'a>) -> Result<Value<'a>, Error> {
        match scope.resolve(name)? {
            Some(found) => self.eval_member(&found),
            None => Err(Error::new(pos, format!("unknown name '{name}'"))),
        }
    }

    #[inline(never)]
    fn array(&mut self, items: &'a [Expr], scope: &RecordValue<'a>) -> Result<Value<'a>, Error> {
        items
            .iter()
            .map(|item| self.eval(item, scope))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    }

    #[inline(never)]
    fn unary(
        &mut self,
        op: UnaryOp,
        operand: &'a Expr,
        pos: Pos,
        scope: &RecordValue<'a>,
    ) -> Result<Value<'a>, Error> {
        let value = self.eval(operand, scope)?;
        match (op, value) {
            (UnaryOp::Neg, Value::Number(n)) => Ok(Value::Number(-n)),
            (UnaryOp::Plus, Value::Number(n)) => Ok(Value::Number(n)),
            (UnaryOp::Not, Value::Bool(b)) => Ok(Value::Bool(!b)),
            (op, v) => {
                let sym = match op {
                    UnaryOp::Neg => "-",
                    UnaryOp::Plus => "+",
                    UnaryOp::Not => "!",
                };
                Err(Error::new(
                    pos,
                    format!("cannot apply unary '{sym}' to {}", v.type_name()),
                ))
            }
        }
    }

    #[inline(never)]
    fn conditional(
        &mut self,
        cond: &'a Expr,
        then: &'a Expr,
        otherwise: &'a Expr,
        scope: &RecordValue<'a>,
    ) -> Result<Value<'a>, Error> {
        match self.eval(cond, scope)? {
            Value::Bool(true) => self.eval(then, scope),
            Value::Bool(false) => self.eval(otherwise, scope),
            v => Err(Error::new(
                cond.pos,
                format!(
                    "the condition of 'if' must be a boolean, not {}",
                    v.type_name()
                ),
            )),
        }
    }

    #[inline(never)]
    fn member(
        &mut self,
        target: &'a Expr,
        name: &str,
        name_pos: Pos,
        scope: &RecordValue<'a>,
    ) -> Result<Value<'a>, Error> {
        match self.eval(target, scope)? {
            Value::Record(record) => match record.find(name)? {
                Some(found) => self.eval_member(&found),
                None => Err(Error::new(
                    name_pos,
                    format!("the record at {} has no member '{name}'", record.pos()),
                )),
            },
            v => Err(Error::new(
                name_pos,
                format!("cannot access member '{name}' of {}", v.type_name()),
            )),
        }
    }

    #[inline(never)]
    fn index(
        &mut self,
        target: &'a Expr,
        index: &'a Expr,
        pos: Pos,
        scope: &RecordValue<'a>,
    ) -> Result<Value<'a>, Error> {
        let items = match self.eval(target, scope)? {
            Value::Array(items) => items,
            v => {
                return Err(Error::new(
                    pos,
                    format!("cannot index {}; only arrays can be indexed", v.type_name()),
                ))
            }
        };
        let i = match self.eval(index, scope)? {
            Value::Number(i) => i,
            v => {
                return Err(Error::new(
                    index.pos,
                    format!("an array index must be a number, not {}", v.type_name()),
                ))
            }
        };
        let len = items.len();
        let valid = i.fract() == 0.0 && i >= 0.0 && i < len as f64;
        match items.into_iter().nth(i as usize) {
            Some(item) if valid => Ok(item),
            _ => Err(Error::new(
                index.pos,
                format!("array index {i} is out of range (the array has {len} elements, indexed from 0)"),
            )),
        }
    }

    /// The error for a construct that has no immediate value.
    #[inline(never)]
    fn unsupported(expr: &Expr) -> Error {
        let pos = expr.pos;
        match &expr.kind {
            ExprKind::Macro(name) => Error::new(
                pos,
                format!("macro '${name}$' is not supported; replace it with its value in the configuration"),
            ),
            ExprKind::Call(callee, _, _) => unsupported(
                pos,
                match &callee.kind {
                    ExprKind::Ident(name) => format!("a call of function '{name}'"),
                    _ => "a function call".to_string(),
                },
            ),
            ExprKind::Lambda(..) => unsupported(pos, "a function (lambda)"),
            ExprKind::New(type_name, _) => unsupported(pos, format!("'new {type_name}'")),
            ExprKind::ArrayCtor(..) => unsupported(pos, "an 'array[..]' constructor"),
            other => unsupported(pos, other.describe()),
        }
    }

    /// Evaluates a chain exactly as the left-nested tree it stands for (`((a + b) + c)`) was
    /// evaluated, without recursing per link: the tree's root is the last link, so the last
    /// unsupported operator is reported before any operand is evaluated; then the operands are
    /// evaluated and combined left to right, `&&` and `||` skipping their right operand when
    /// the left one decides.
    #[inline(never)]
    fn chain(
        &mut self,
        first: &'a Expr,
        links: &'a [ChainLink],
        scope: &RecordValue<'a>,
    ) -> Result<Value<'a>, Error> {
        if let Some(link) = links.iter().rev().find(|l| !is_evaluable(l.op)) {
            return Err(unsupported(
                link.pos,
                format!("operator '{}'", link.op.symbol()),
            ));
        }
        let mut value = self.eval(first, scope)?;
        // Where the left operand of the next link is reported: the start of `first`, then
        // the operator of the previous link (the root of the subtree it stands for).
        let mut value_pos = first.pos;
        for link in links {
            value = self.link(value, value_pos, link, scope)?;
            value_pos = link.pos;
        }
        Ok(value)
    }

    /// Applies one link of a chain to the value of everything before it (`left`, reported at
    /// `left_pos`).
    fn link(
        &mut self,
        left: Value<'a>,
        left_pos: Pos,
        link: &'a ChainLink,
        scope: &RecordValue<'a>,
    ) -> Result<Value<'a>, Error> {
        let op = link.op;
        if !matches!(op, BinaryOp::And | BinaryOp::Or) {
            let right = self.eval(&link.operand, scope)?;
            return combine(op, link.pos, left, right);
        }
        let left = as_bool(left, left_pos, op)?;
        // Short-circuit: the right operand is only evaluated when it matters.
        if (op == BinaryOp::And) != left {
            return Ok(Value::Bool(left));
        }
        let right = self.eval(&link.operand, scope)?;
        as_bool(right, link.operand.pos, op).map(Value::Bool)
    }
}

/// Whether the evaluator gives operator `op` a value (the others are errors).
fn is_evaluable(op: BinaryOp) -> bool {
    use BinaryOp as B;
    !matches!(op, B::Pow | B::Mod | B::Shl | B::Shr | B::With)
}

/// `left op right` for an operator other than `&&` and `||`, reported at `pos`.
fn combine<'a>(
    op: BinaryOp,
    pos: Pos,
    left: Value<'a>,
    right: Value<'a>,
) -> Result<Value<'a>, Error> {
    let types = (left.type_name(), right.type_name());
    let value = match (left, right) {
        (Value::Number(a), Value::Number(b)) => numbers(op, a, b),
        (Value::Str(mut a), Value::Str(b)) if op == BinaryOp::Add => {
            // In place, so that a long chain of concatenations takes linear time.
            a.push_str(&b);
            Some(Value::Str(a))
        }
        (Value::Str(a), Value::Str(b)) => compare(op, &a, &b),
        (Value::Bool(a), Value::Bool(b)) => match op {
            BinaryOp::Eq => Some(Value::Bool(a == b)),
            BinaryOp::Ne => Some(Value::Bool(a != b)),
            _ => None,
        },
        _ => None,
    };
    value.ok_or_else(|| {
        let (left, right) = types;
        let message = format!("cannot apply '{}' to {left} and {right}", op.symbol());
        Error::new(pos, message)
    })
}

/// `a op b` on numbers; `None` for an operator numbers do not take.
fn numbers<'a>(op: BinaryOp, a: f64, b: f64) -> Option<Value<'a>> {
    use BinaryOp as B;
    let value = match op {
        B::Add => Value::Number(a + b),
        B::Sub => Value::Number(a - b),
        B::Mul | B::ElemMul => Value::Number(a * b),
        B::Div => Value::Number(a / b),
        _ => return compare(op, &a, &b),
    };
    Some(value)
}

/// `a op b` for a comparison operator; `None` for any other operator.
fn compare<'a, T: PartialOrd + ?Sized>(op: BinaryOp, a: &T, b: &T) -> Option<Value<'a>> {
    use BinaryOp as B;
    let result = match op {
        B::Eq => a == b,
        B::Ne => a != b,
        B::Lt => a < b,
        B::Le => a <= b,
        B::Gt => a > b,
        B::Ge => a >= b,
        _ => return None,
    };
    Some(Value::Bool(result))
}

/// An operand of `&&` or `||`, which must be a boolean; reported at `pos`.
fn as_bool(value: Value, pos: Pos, op: BinaryOp) -> Result<bool, Error> {
    match value {
        Value::Bool(b) => Ok(b),
        v => Err(Error::new(
            pos,
            format!(
                "the operands of '{}' must be booleans, not {}",
                op.symbol(),
                v.type_name()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{parse, with_small_stack};
    use super::*;

    fn eval_x(text: &str) -> Result<String, Error> {
        let doc = parse(text).unwrap();
        let mut ev = Evaluator::new(&doc);
        let root = ev.root();
        let v = ev.get(&root, "x")?.expect("x");
        Ok(show(&v))
    }

    fn show(v: &Value) -> String {
        match v {
            Value::Number(n) => format!("{n}"),
            Value::Str(s) => format!("{s:?}"),
            Value::Bool(b) => format!("{b}"),
            Value::Array(items) => {
                let parts: Vec<_> = items.iter().map(show).collect();
                format!("({})", parts.join(":"))
            }
            Value::Record(r) => {
                let names: Vec<_> = r.record().members.iter().map(|m| m.name.clone()).collect();
                format!("{{{}}}", names.join(","))
            }
        }
    }

    #[test]
    fn literals_and_arithmetic() {
        assert_eq!(eval_x("x = 28 * 28").unwrap(), "784");
        assert_eq!(eval_x("x = 1 + 2 * 3 - 8 / 4").unwrap(), "5");
        assert_eq!(eval_x("x = -(2 .* 3) + +1").unwrap(), "-5");
        assert_eq!(eval_x("x = 'a' + \"b\"").unwrap(), "\"ab\"");
        assert_eq!(eval_x("x = 1e3 + .5").unwrap(), "1000.5");
    }

    #[test]
    fn comparisons_and_logic() {
        assert_eq!(
            eval_x("x = 1 < 2 && 2 <= 2 && 3 > 2 && 3 >= 3").unwrap(),
            "true"
        );
        assert_eq!(
            eval_x("x = 'a' == 'a' && 'a' != 'b' && !(1 == 2)").unwrap(),
            "true"
        );
        assert_eq!(eval_x("x = false || true == true").unwrap(), "true");
        // Short circuit: the unsupported right operand is never evaluated.
        assert_eq!(eval_x("x = false && $M$").unwrap(), "false");
        assert_eq!(eval_x("x = true || f(1)").unwrap(), "true");
    }

    #[test]
    fn conditionals() {
        assert_eq!(
            eval_x("x = if n > 1 then 'big' else f(1)\nn = 2").unwrap(),
            "\"big\""
        );
        let err = eval_x("x = if 1 then 2 else 3").unwrap_err();
        assert!(err.message().contains("must be a boolean"));
        assert_eq!(err.pos(), Pos::new(1, 8));
    }

    #[test]
    fn outward_lookup_any_order() {
        assert_eq!(eval_x("x = r.y\nr = [ y = a * 2 ]\na = 21").unwrap(), "42");
        assert_eq!(eval_x("x = { a = 13 ; y = a * a }.y").unwrap(), "169");
        // Inner names shadow outer ones.
        assert_eq!(eval_x("a = 1\nx = [ a = 2; b = a ].b").unwrap(), "2");
    }

    #[test]
    fn member_access_does_not_search_outward() {
        let err = eval_x("f = 1\nr = [ a = 1 ]\nx = r.f").unwrap_err();
        assert!(err.message().contains("has no member 'f'"));
        assert_eq!(err.pos(), Pos::new(3, 7));
    }

    #[test]
    fn case_insensitive_names() {
        assert_eq!(eval_x("X = 1\ny = x").unwrap(), "1");
        assert_eq!(eval_x("Dim = 3\nx = dim + 1").unwrap(), "4");
        assert_eq!(eval_x("dim = 3\nDim = 4\nx = Dim").unwrap(), "4");
        let err = eval_x("dim = 3\nDim = 4\nx = DIM").unwrap_err();
        assert!(err.message().contains("ambiguous"));
    }

    /// A reference takes the nearest member spelled exactly as it is, searched outward
    /// through every enclosing record, before any member of another case (BrainScript is
    /// case-sensitive); only without one anywhere does case not matter.
    #[test]
    fn references_prefer_an_exact_spelling_anywhere_outward() {
        // Not a cycle: `File` is the top-level member.
        assert_eq!(
            eval_x("File = 1\nr = [ file = File ]\nx = r.file").unwrap(),
            "1"
        );
        // Not the sibling `format`.
        assert_eq!(
            eval_x("Format = 'sparse'\nr = [ format = 'dense'; dim = Format ]\nx = r.dim").unwrap(),
            "\"sparse\""
        );
        assert_eq!(
            eval_x("A = 1\nx = [ a = 2; r = [ y = A ] ].r.y").unwrap(),
            "1"
        );
        // The nearest exact spelling wins over an outer one.
        assert_eq!(
            eval_x("a = 1\nx = [ a = 2; r = [ y = a ] ].r.y").unwrap(),
            "2"
        );
        // No exact spelling anywhere: the nearest match ignoring case.
        assert_eq!(
            eval_x("A = 1\nx = [ B = 2; r = [ y = b ] ].r.y").unwrap(),
            "2"
        );
        assert_eq!(eval_x("A = 1\nx = [ r = [ y = a ] ].r.y").unwrap(), "1");
    }

    #[test]
    fn arrays_and_indexing() {
        assert_eq!(eval_x("x = 1:2:3").unwrap(), "(1:2:3)");
        assert_eq!(eval_x("x = (a:b)[1]\na = 5\nb = 6").unwrap(), "6");
        assert_eq!(eval_x("x = [| 'a'; 'b' |][0]").unwrap(), "\"a\"");
        assert!(eval_x("x = (1:2)[2]")
            .unwrap_err()
            .message()
            .contains("out of range"));
        assert!(eval_x("x = (1:2)[0.5]").is_err());
        assert!(eval_x("x = 3[0]").is_err());
    }

    #[test]
    fn cycles() {
        let err = eval_x("x = a\na = b + 1\nb = a").unwrap_err();
        assert_eq!(err.message(), "cycle: a (2:1) -> b (3:1) -> a (2:1)");
        let err = eval_x("x = x").unwrap_err();
        assert!(err.message().starts_with("cycle: x (1:1) -> x (1:1)"));
    }

    #[test]
    fn unsupported_constructs_fail_only_when_evaluated() {
        let text = "x = 1\nm = $DeviceId$\nc = Foo(1)\nl = (z => z)\nn = new ComputationNetwork { }\na[i:1..2] = i\nf(q) = q";
        assert_eq!(eval_x(text).unwrap(), "1");
        let doc = parse(text).unwrap();
        let mut ev = Evaluator::new(&doc);
        let root = ev.root();
        let cases = [
            ("m", Pos::new(2, 5), "macro '$DeviceId$'"),
            ("c", Pos::new(3, 8), "function 'Foo'"),
            ("l", Pos::new(4, 6), "lambda"),
            ("n", Pos::new(5, 5), "'new ComputationNetwork'"),
            ("a", Pos::new(6, 1), "'array[..]'"),
            ("f", Pos::new(7, 2), "lambda"),
        ];
        for (name, pos, fragment) in cases {
            let err = ev.get(&root, name).unwrap_err();
            assert_eq!(err.pos(), pos, "{name}");
            assert!(err.message().contains(fragment), "{name}: {err}");
        }
    }

    #[test]
    fn type_errors() {
        assert!(eval_x("x = 'a' + 1")
            .unwrap_err()
            .message()
            .contains("a string and a number"));
        assert!(eval_x("x = -'a'").is_err());
        assert!(eval_x("x = 2 ** 3").unwrap_err().message().contains("'**'"));
        assert!(eval_x("x = 1 && true").is_err());
        assert!(eval_x("x = y")
            .unwrap_err()
            .message()
            .contains("unknown name 'y'"));
    }

    #[test]
    fn deep_evaluation_fits_in_one_mebibyte_of_stack() {
        let mut text = String::from("x = a0\n");
        for i in 0..1000 {
            text.push_str(&format!("a{i} = [ v = (a{} + 1) * 1 ].v\n", i + 1));
        }
        text.push_str("a1000 = 0\n");
        let refused = with_small_stack(move || {
            eval_x(&text).is_err_and(|e| e.message().contains("deeper than"))
        });
        assert!(refused);
    }

    #[test]
    fn long_reference_chains_are_capped() {
        let mut text = String::from("x = a0\n");
        for i in 0..2000 {
            text.push_str(&format!("a{i} = a{}\n", i + 1));
        }
        text.push_str("a2000 = 1\n");
        let err = eval_x(&text).unwrap_err();
        assert!(err.message().contains("deeper than"));
        let mut ok = String::from("x = a0\n");
        // 50 hops of two evaluation levels each stay below the cap.
        for i in 0..50 {
            ok.push_str(&format!("a{i} = a{} + 1\n", i + 1));
        }
        ok.push_str("a50 = 0\n");
        assert_eq!(eval_x(&ok).unwrap(), "50");
    }

    /// `x = FIRST LINK(2) LINK(3) ... LINK(n)`: a chain of `n` terms.
    fn chain(first: &str, n: usize, link: impl Fn(usize) -> String) -> String {
        let mut text = format!("x = {first}");
        for k in 2..=n {
            text.push_str(&link(k));
        }
        text
    }

    #[test]
    fn long_sums_and_differences() {
        with_small_stack(|| {
            for n in [129, 1000, 100_000] {
                let sum = chain("1", n, |k| format!(" + {k}"));
                assert_eq!(eval_x(&sum).unwrap(), (n * (n + 1) / 2).to_string());
                // 1 - 2 + 3 - 4 ... n, grouped from the left: -n/2 for even n, else (n+1)/2.
                let signed = |k: usize| {
                    let op = if k.is_multiple_of(2) { '-' } else { '+' };
                    format!(" {op} {k}")
                };
                let n = n as i64;
                let expected = if n % 2 == 0 { -n / 2 } else { (n + 1) / 2 };
                assert_eq!(
                    eval_x(&chain("1", n as usize, signed)).unwrap(),
                    expected.to_string()
                );
                // Parenthesised operands: the first n odd numbers add up to n².
                let odd = chain("(1 * 2 - 1)", n as usize, |k| format!(" + ({k} * 2 - 1)"));
                assert_eq!(eval_x(&odd).unwrap(), (n * n).to_string());
            }
        });
    }

    #[test]
    fn long_products_and_quotients() {
        with_small_stack(|| {
            for n in [129, 1000, 100_000] {
                // Links cycle through `* 4`, `/ 2`, `.* 0.5`; the result is 3 * 2^e, e counting
                // +2 for each `* 4` and -1 for each of the others (all exact in binary).
                let links = [" * 4", " / 2", " .* 0.5"];
                let text = chain("3", n, |k| links[k % 3].to_string());
                let e: i32 = (2..=n).map(|k| if k % 3 == 0 { 2 } else { -1 }).sum();
                assert_eq!(eval_x(&text).unwrap(), (3.0 * 2f64.powi(e)).to_string());
            }
        });
    }

    #[test]
    fn long_comparisons_logic_and_concatenations() {
        with_small_stack(|| {
            for n in [129, 1000, 100_000] {
                // Grouped from the left, every step compares booleans; from the right, the
                // first step would compare a number with a boolean.
                let cmp = |k: usize| {
                    let link = if k.is_multiple_of(2) {
                        " == true"
                    } else {
                        " != false"
                    };
                    link.to_string()
                };
                assert_eq!(eval_x(&chain("1 < 2", n, cmp)).unwrap(), "true");
                assert_eq!(
                    eval_x(&(chain("1 < 2", n, cmp) + " == false")).unwrap(),
                    "false"
                );
                let all = chain("true", n, |_| " && true".to_string());
                assert_eq!(eval_x(&all).unwrap(), "true");
                // Short circuit: the operands after the deciding one are never evaluated.
                let and = chain("true", n, |k| {
                    if k < n / 2 { " && true" } else { " && f(1)" }.into()
                });
                let and = and.replacen(" && f(1)", " && false", 1);
                assert_eq!(eval_x(&and).unwrap(), "false");
                let or = chain("false", n, |k| {
                    if k < n / 2 { " || false" } else { " || $M$" }.into()
                });
                let or = or.replacen(" || $M$", " || true", 1);
                assert_eq!(eval_x(&or).unwrap(), "true");
                let letter = |k: usize| char::from(b'a' + (k % 26) as u8);
                let text = chain("'b'", n, |k| format!(" + '{}'", letter(k)));
                let expected: String = (1..=n).map(letter).collect();
                assert_eq!(eval_x(&text).unwrap(), format!("{expected:?}"));
            }
        });
    }

    #[test]
    fn long_arrays() {
        with_small_stack(|| {
            for n in [129, 1000, 100_000] {
                // (0 : 1 : ... : n-1), indexed at its last element.
                let text = chain("(0", n, |k| format!(" : {}", k - 1)) + &format!(")[{}]", n - 1);
                assert_eq!(eval_x(&text).unwrap(), (n - 1).to_string());
            }
        });
    }

    /// An error in a chain of 1,000 terms is the error of the same short chain (as the
    /// evaluator of nested binary nodes gave it), moved by the text inserted before it.
    #[test]
    fn errors_in_long_chains_are_those_of_short_ones() {
        // (text with {A} and {B} where terms are inserted, the inserted term, the short
        // chain's error column and message)
        let cases = [
            (
                "1 + 2{A} + 'a' + 3{B}",
                " + 0",
                11,
                "cannot apply '+' to a number and a string",
            ),
            (
                "1{A} + 2 && true{B}",
                " + 0",
                7,
                "the operands of '&&' must be booleans, not a number",
            ),
            (
                "true && true{A} && 1 && true{B}",
                " && true",
                21,
                "the operands of '&&' must be booleans, not a number",
            ),
            (
                "false{A} || 'b' || true{B}",
                " || false",
                14,
                "the operands of '||' must be booleans, not a string",
            ),
            (
                "1{A} == 1 == 2{B}",
                " + 0",
                12,
                "cannot apply '==' to a boolean and a number",
            ),
            (
                "1{A} * 'a' ** 2{B}",
                " * 1",
                13,
                "cannot evaluate operator '**'",
            ),
            (
                "1 ** 2{A} * 'a' % 3{B}",
                " * 1",
                18,
                "cannot evaluate operator '%'",
            ),
        ];
        let errors = with_small_stack(move || {
            let mut errors = Vec::new();
            for (text, term, col, message) in cases {
                let short = format!("x = {}", text.replace("{A}", "").replace("{B}", ""));
                let long = format!(
                    "x = {}",
                    text.replace("{A}", &term.repeat(1000))
                        .replace("{B}", &term.repeat(1000))
                );
                let short = eval_x(&short).unwrap_err();
                let long = eval_x(&long).unwrap_err();
                errors.push((short, long, term.len() * 1000, col, message));
            }
            errors
        });
        for (short, long, shift, col, message) in errors {
            assert_eq!(short.pos(), Pos::new(1, col), "{short}");
            assert!(short.message().starts_with(message), "{short}");
            assert_eq!(long.message(), short.message());
            assert_eq!(long.pos(), Pos::new(1, col + shift as u32), "{long}");
        }
    }
}
