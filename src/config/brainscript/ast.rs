//! Syntax tree of a BrainScript document. Every node carries the line:column where it starts.
//! Sugar is removed while parsing: a function member `f(x) = e` becomes `f = (x) => e`, and an
//! array member `a[i:1..n] = e` becomes `a = array[1..n] (i => e)`.

use super::error::{Error, Pos};

/// An expression with its position.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// Where the expression starts (for infix operations: the last operator of the chain).
    pub pos: Pos,
    /// What the expression is.
    pub kind: ExprKind,
}

/// The kinds of BrainScript expressions.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A number literal; numbers are always doubles.
    Number(f64),
    /// A string literal.
    Str(String),
    /// `true` or `false`.
    Bool(bool),
    /// A reference to a member, searched outward through the enclosing records.
    Ident(String),
    /// A legacy `$name$` macro (holds `name`); it parses but cannot be evaluated.
    Macro(String),
    /// A record `[ ... ]` or `{ ... }`.
    Record(Record),
    /// An array: `a : b : c`, or the F# form `[| a; b |]`.
    Array(Vec<Expr>),
    /// A unary operation.
    Unary(UnaryOp, Box<Expr>),
    /// A run of infix operations of one precedence, applied left to right: `first`, then
    /// each link's operator with its operand (`a - b + c` is `((a - b) + c)`). A run is one
    /// node however long it is, so a long sum is not deep nesting. A parenthesised left operand
    /// stays a node of its own: `(a + b) + c` is a chain whose first operand is a chain.
    Chain(Box<Expr>, Vec<ChainLink>),
    /// `if cond then a else b`.
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `target.name`, with the position of `name`.
    Member(Box<Expr>, String, Pos),
    /// `target[index]`.
    Index(Box<Expr>, Box<Expr>),
    /// A call `f (args)`, or `F {args}` when the flag is true.
    Call(Box<Expr>, Args, bool),
    /// A function: its parameters (all identifiers; named ones with defaults) and body.
    Lambda(Args, Box<Expr>),
    /// `new TYPE argument`.
    New(String, Box<Expr>),
    /// `array[from..to] (initializer)`.
    ArrayCtor(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A member's value that is not BrainScript (legacy text such as `./work` or
    /// `$ModelDir$/03_model`, a comma list `(a, b)`), or the value of a name defined twice in
    /// one record: the error it gives when evaluated. CNTK reads configuration files with
    /// its legacy parser, which keeps every value as text and converts it only when read,
    /// so such a value in a member the reader never reads is no error.
    Unparsed(Box<Error>),
}

impl ExprKind {
    /// A short name of the construct, for error messages.
    pub fn describe(&self) -> &'static str {
        match self {
            ExprKind::Number(_) => "number",
            ExprKind::Str(_) => "string",
            ExprKind::Bool(_) => "boolean",
            ExprKind::Ident(_) => "name",
            ExprKind::Macro(_) => "macro",
            ExprKind::Record(_) => "record",
            ExprKind::Array(_) => "array",
            ExprKind::Unary(..) => "unary operation",
            ExprKind::Chain(..) => "infix operation",
            ExprKind::If(..) => "conditional",
            ExprKind::Member(..) => "member access",
            ExprKind::Index(..) => "indexing",
            ExprKind::Call(..) => "function call",
            ExprKind::Lambda(..) => "function definition",
            ExprKind::New(..) => "'new' expression",
            ExprKind::ArrayCtor(..) => "array constructor",
            ExprKind::Unparsed(_) => "text that is not BrainScript",
        }
    }
}

/// One step of an [`ExprKind::Chain`]: an infix operator and its right operand.
#[derive(Clone, Debug, PartialEq)]
pub struct ChainLink {
    /// The operator.
    pub op: BinaryOp,
    /// Position of the operator (where errors of this step are reported).
    pub pos: Pos,
    /// The right operand.
    pub operand: Expr,
}

/// Arguments of a call, or parameters of a function definition.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Args {
    /// Positional arguments (parameters: identifiers).
    pub positional: Vec<Expr>,
    /// Named arguments `name = value` (parameters: optional ones with their default), with the
    /// position of the name.
    pub named: Vec<(String, Pos, Expr)>,
}

/// A record: members in declaration order.
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    /// Position of the opening bracket (for the document: 1:1).
    pub pos: Pos,
    /// The members, in the order they are written.
    pub members: Vec<Member>,
    /// A number unique within the document, used to cache evaluated members.
    pub(crate) id: usize,
    /// Where the record's first `include "FILE"` is, if it has one. Included text is not
    /// read, so looking up a name the record lacks, or listing its members, fails there.
    pub include: Option<Pos>,
}

/// One `name = value` member of a record.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    /// The member's name as written.
    pub name: String,
    /// Position of the name.
    pub pos: Pos,
    /// The value (functions and array definitions already rewritten, see the module doc).
    pub value: Expr,
}

/// Prefix operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    /// `-x`
    Neg,
    /// `+x`
    Plus,
    /// `!x`
    Not,
}

/// Infix operators (`:` builds an [`ExprKind::Array`] instead). All are left-associative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `+` (numbers, string concatenation)
    Add,
    /// `-`
    Sub,
    /// `*` (matrix product; plain product on numbers)
    Mul,
    /// `/`
    Div,
    /// `.*` (element-wise product)
    ElemMul,
    /// `**`
    Pow,
    /// `%`
    Mod,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `&&`
    And,
    /// `||`
    Or,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
    /// `with` (record update)
    With,
}

impl BinaryOp {
    /// How tightly the operator binds (higher binds tighter); operators of one precedence
    /// share a chain.
    pub fn precedence(self) -> u8 {
        match self {
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::ElemMul | BinaryOp::Pow | BinaryOp::Mod => 10,
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::With => 9,
            BinaryOp::Eq
            | BinaryOp::Ne
            | BinaryOp::Lt
            | BinaryOp::Le
            | BinaryOp::Gt
            | BinaryOp::Ge => 8,
            BinaryOp::And => 7,
            BinaryOp::Or => 6,
            BinaryOp::Shl | BinaryOp::Shr => 5,
        }
    }

    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::ElemMul => ".*",
            BinaryOp::Pow => "**",
            BinaryOp::Mod => "%",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::And => "&&",
            BinaryOp::Or => "||",
            BinaryOp::Shl => "<<",
            BinaryOp::Shr => ">>",
            BinaryOp::With => "with",
        }
    }
}

impl Record {
    /// The members whose name matches `name` case-insensitively, exact matches first.
    pub fn find(&self, name: &str) -> Vec<(usize, &Member)> {
        let mut found: Vec<(usize, &Member)> = self
            .members
            .iter()
            .enumerate()
            .filter(|(_, m)| m.name.eq_ignore_ascii_case(name))
            .collect();
        found.sort_by_key(|(_, m)| m.name != name);
        found
    }
}
