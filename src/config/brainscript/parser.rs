//! Parser: builds the syntax tree of a whole BrainScript document (an implicit top-level
//! record) by precedence climbing over the lexer's tokens.
//!
//! Precedence, loosest first: `=>`, `:`, `<<` `>>`, `||`, `&&`, comparisons, `+` `-` `with`,
//! `*` `/` `.*` `**` `%`, unary `-` `+` `!`, then postfix `.name`, `[index]`, `(args)` and
//! `{args}`. An expression continues across line breaks while an operator can continue it;
//! record members are separated by a line break, `;` or `,`. Nesting is capped at
//! [`MAX_DEPTH`] so that no input can exhaust the stack. All infix operators are
//! left-associative; a run of them at one precedence is built as one [`ExprKind::Chain`] node,
//! so a sum of any length is not nesting.

use std::collections::HashMap;

use super::ast::{Args, BinaryOp, ChainLink, Expr, ExprKind, Member, Record, UnaryOp};
use super::error::{Error, Pos};
use super::lexer::{tokenize, TokKind, Token};
use super::MAX_DEPTH;

/// Parses a whole document into its top-level record.
pub fn parse(text: &str) -> Result<Record, Error> {
    let tokens = tokenize(text)?;
    let mut parser = Parser {
        tokens,
        eof: Token {
            kind: TokKind::Eof,
            pos: Pos::default(),
            line_initial: true,
        },
        at: 0,
        depth: 0,
        next_record_id: 0,
    };
    let (record, _) = parser.record_members(Pos::new(1, 1), None)?;
    Ok(record)
}

/// A parsed node with the depth of its tree.
type Node = (Expr, usize);

/// Precedence of unary operators: below postfix operators, above all infix ones.
const UNARY_PRECEDENCE: u8 = 90;

struct Parser {
    tokens: Vec<Token>,
    eof: Token,
    at: usize,
    depth: usize,
    next_record_id: usize,
}

/// The part of a member definition before its `=`.
struct MemberHead {
    name: String,
    pos: Pos,
    array_def: Option<(String, Pos, Node, Node)>,
    params: Option<(Args, Pos, usize)>,
}

/// What can follow an operand.
enum Infix {
    Binary(BinaryOp),
    Colon,
    Arrow,
    Dot,
    Index,
    Call(bool),
}

fn infix_of(token: &Token) -> Option<(Infix, u8)> {
    let op = match &token.kind {
        TokKind::Keyword("with") => BinaryOp::With,
        TokKind::Punct(p) => match binary_op(p) {
            Some(op) => op,
            None => return other_infix_of(p),
        },
        _ => return None,
    };
    Some((Infix::Binary(op), op.precedence()))
}

/// The infix operator written `p`, if it is one.
fn binary_op(p: &str) -> Option<BinaryOp> {
    let op = match p {
        "*" => BinaryOp::Mul,
        "/" => BinaryOp::Div,
        ".*" => BinaryOp::ElemMul,
        "**" => BinaryOp::Pow,
        "%" => BinaryOp::Mod,
        "+" => BinaryOp::Add,
        "-" => BinaryOp::Sub,
        "==" => BinaryOp::Eq,
        "!=" => BinaryOp::Ne,
        "<" => BinaryOp::Lt,
        "<=" => BinaryOp::Le,
        ">" => BinaryOp::Gt,
        ">=" => BinaryOp::Ge,
        "&&" => BinaryOp::And,
        "||" => BinaryOp::Or,
        "<<" => BinaryOp::Shl,
        ">>" => BinaryOp::Shr,
        _ => return None,
    };
    Some(op)
}

/// The punctuation that continues an operand other than the infix operators.
fn other_infix_of(p: &str) -> Option<(Infix, u8)> {
    match p {
        "." => Some((Infix::Dot, 99)),
        "[" => Some((Infix::Index, 99)),
        "(" => Some((Infix::Call(false), 99)),
        "{" => Some((Infix::Call(true), 99)),
        ":" => Some((Infix::Colon, 4)),
        "=>" => Some((Infix::Arrow, 0)),
        _ => None,
    }
}

fn boxed(node: Node) -> Box<Expr> {
    Box::new(node.0)
}

impl Parser {
    fn peek(&self) -> &Token {
        // `tokenize` always ends with Eof, and `advance` never moves past it.
        self.tokens.get(self.at).unwrap_or(&self.eof)
    }

    fn advance(&mut self) -> Token {
        let token = self.peek().clone();
        if self.at + 1 < self.tokens.len() {
            self.at += 1;
        }
        token
    }

    fn expected(&self, what: &str) -> Error {
        let token = self.peek();
        if let TokKind::Bad(error) = &token.kind {
            return (**error).clone();
        }
        Error::new(
            token.pos,
            format!("expected {what}, found {}", token.describe()),
        )
    }

    fn expect_punct(&mut self, p: &str) -> Result<Pos, Error> {
        if self.peek().is_punct(p) {
            Ok(self.advance().pos)
        } else {
            Err(self.expected(&format!("'{p}'")))
        }
    }

    fn expect_keyword(&mut self, k: &str) -> Result<(), Error> {
        if self.peek().is_keyword(k) {
            self.advance();
            Ok(())
        } else {
            Err(self.expected(&format!("'{k}'")))
        }
    }

    fn expect_ident(&mut self, what: &str) -> Result<(String, Pos), Error> {
        match &self.peek().kind {
            TokKind::Ident(name) => {
                let name = name.clone();
                Ok((name, self.advance().pos))
            }
            _ => Err(self.expected(what)),
        }
    }

    /// Enters one nesting level, failing beyond [`MAX_DEPTH`].
    fn enter(&mut self, pos: Pos) -> Result<(), Error> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Error::new(
                pos,
                format!("expression nested deeper than {MAX_DEPTH} levels"),
            ));
        }
        Ok(())
    }

    fn check_tree_depth(pos: Pos, depth: usize) -> Result<usize, Error> {
        if depth > MAX_DEPTH {
            Err(Error::new(
                pos,
                format!("expression nested deeper than {MAX_DEPTH} levels"),
            ))
        } else {
            Ok(depth)
        }
    }

    /// Members up to `close` (or to the end of the text when `close` is `None`).
    fn record_members(&mut self, pos: Pos, close: Option<&str>) -> Result<(Record, usize), Error> {
        let id = self.next_record_id;
        self.next_record_id += 1;
        let mut members: Vec<Member> = Vec::new();
        // Where each name was defined, so that a duplicate is found in one lookup (a scan of
        // the earlier members made a record of n members take n^2 / 2 comparisons).
        let mut defined: HashMap<String, usize> = HashMap::new();
        let mut include = None;
        let mut depth = 1;
        let mut need_separator = false;
        loop {
            let token = self.peek();
            let at_end = match close {
                Some(c) => token.is_punct(c),
                None => token.kind == TokKind::Eof,
            };
            if at_end {
                self.advance();
                break;
            }
            if token.is_punct(";") || token.is_punct(",") {
                self.advance();
                need_separator = false;
                continue;
            }
            self.check_member_start(need_separator, pos, close)?;
            if self.peek().is_keyword("include") {
                let at = self.include()?;
                include = include.or(Some(at));
                need_separator = true;
                continue;
            }
            let start = (self.at, self.depth);
            let (member, member_depth) = match self.member().and_then(|member| {
                self.check_member_end(close)?;
                Ok(member)
            }) {
                Ok(member) => member,
                Err(error) => {
                    (self.at, self.depth) = start;
                    self.unparsed_member(error, close)?
                }
            };
            depth = depth.max(member_depth + 1);
            Self::add_member(&mut members, &mut defined, member);
            need_separator = true;
        }
        let depth = Self::check_tree_depth(pos, depth)?;
        let record = Record {
            pos,
            members,
            id,
            include,
        };
        Ok((record, depth))
    }

    /// `include "FILE"` at a member's place: its position. Included text is not read
    /// ([`Record::include`]).
    #[inline(never)]
    fn include(&mut self) -> Result<Pos, Error> {
        let at = self.advance().pos;
        match self.peek().kind {
            TokKind::Str(_) => {
                self.advance();
                Ok(at)
            }
            _ => Err(include_error(at)),
        }
    }

    /// Checks that a member's value ends where a member may end: at a line break, `;`, `,`,
    /// the record's `close` or the end of the text.
    fn check_member_end(&self, close: Option<&str>) -> Result<(), Error> {
        let token = self.peek();
        let ends = token.line_initial
            || token.is_punct(";")
            || token.is_punct(",")
            || token.kind == TokKind::Eof
            || close.is_some_and(|c| token.is_punct(c));
        if ends {
            Ok(())
        } else {
            Err(self.expected("';' or a line break between members"))
        }
    }

    /// The member `name = TEXT` starting at the current token, whose value failed to parse
    /// with `error`, kept as [`ExprKind::Unparsed`] as CNTK's legacy parser keeps a value as
    /// text: the value runs to the first line break, `;` or `,` outside brackets, or to the
    /// record's `close`. When the member does not start with `name =`, its value is empty,
    /// or its brackets do not pair up (CNTK refuses those too), `error` is the document's
    /// error.
    #[inline(never)]
    fn unparsed_member(
        &mut self,
        error: Error,
        close: Option<&str>,
    ) -> Result<(Member, usize), Error> {
        let (name, pos) = match &self.peek().kind {
            TokKind::Ident(name) => (name.clone(), self.peek().pos),
            _ => return Err(error),
        };
        let value_start = self.at + 1;
        match self.tokens.get(value_start) {
            Some(t) if t.is_punct("=") => {}
            _ => return Err(error),
        }
        let first = value_start + 1;
        let mut at = first;
        // The closing brackets that the open ones expect, innermost last.
        let mut open: Vec<&str> = Vec::new();
        loop {
            let token = self.tokens.get(at).unwrap_or(&self.eof);
            let TokKind::Punct(p) = token.kind else {
                if token.kind == TokKind::Eof {
                    if !open.is_empty() || close.is_some() {
                        return Err(error);
                    }
                    break;
                }
                if open.is_empty() && at > first && token.line_initial {
                    break;
                }
                at += 1;
                continue;
            };
            if open.is_empty() && at > first && (token.line_initial || p == ";" || p == ",") {
                break;
            }
            match p {
                "[" => open.push("]"),
                "(" => open.push(")"),
                "{" => open.push("}"),
                "[|" => open.push("|]"),
                "]" | ")" | "}" | "|]" => match open.pop() {
                    Some(expected) if expected == p => {}
                    None if close == Some(p) => break,
                    _ => return Err(error),
                },
                _ => {}
            }
            at += 1;
        }
        if at == first {
            return Err(error);
        }
        self.at = at;
        let value = Expr {
            pos: self.tokens[first].pos,
            kind: ExprKind::Unparsed(Box::new(error)),
        };
        Ok((Member { name, pos, value }, 1))
    }

    /// Checks that a member may start at the current token.
    #[inline(never)]
    fn check_member_start(
        &self,
        need_separator: bool,
        pos: Pos,
        close: Option<&str>,
    ) -> Result<(), Error> {
        let token = self.peek();
        if need_separator && !token.line_initial {
            return Err(self.expected("';' or a line break between members"));
        }
        if token.kind == TokKind::Eof {
            let close = close.unwrap_or("");
            return Err(Error::new(
                pos,
                format!("record opened here is not closed with '{close}'"),
            ));
        }
        Ok(())
    }

    /// Adds `member` to `members`, and its name to `defined` (the names of `members`, with
    /// their indices). A name defined twice is an error only when evaluated, as an
    /// [`ExprKind::Unparsed`] value of its first definition: CNTK's legacy parser takes
    /// the later value where BrainScript refuses the record, so the reader refuses to
    /// choose, but a repeated key it never reads is no error.
    #[inline(never)]
    fn add_member(members: &mut Vec<Member>, defined: &mut HashMap<String, usize>, member: Member) {
        match defined.get(&member.name) {
            Some(&first) => {
                let error = Error::new(
                    member.pos,
                    format!(
                        "duplicate member '{}' (first defined at {})",
                        member.name, members[first].pos
                    ),
                );
                members[first].value = Expr {
                    pos: member.pos,
                    kind: ExprKind::Unparsed(Box::new(error)),
                };
            }
            None => {
                defined.insert(member.name.clone(), members.len());
                members.push(member);
            }
        }
    }

    /// `name = e`, `f(params) = e`, `F{params} = e` or `a[i:from..to] = e`.
    fn member(&mut self) -> Result<(Member, usize), Error> {
        let head = Box::new(self.member_head()?);
        self.expect_punct("=")?;
        let value = self.expression(0)?;
        Self::member_finish(head, value)
    }

    /// The part of a member before `=`.
    #[inline(never)]
    fn member_head(&mut self) -> Result<MemberHead, Error> {
        let (name, pos) = self.expect_ident("a member name")?;
        let mut array_def = None;
        if self.peek().is_punct("[") {
            self.advance();
            let (index, index_pos) = self.expect_ident("an index variable")?;
            self.expect_punct(":")?;
            let from = self.expression(0)?;
            self.expect_punct("..")?;
            let to = self.expression(0)?;
            self.expect_punct("]")?;
            array_def = Some((index, index_pos, from, to));
        }
        let params = if self.peek().is_punct("(") || self.peek().is_punct("{") {
            Some(self.args(true)?)
        } else {
            None
        };
        Ok(MemberHead {
            name,
            pos,
            array_def,
            params,
        })
    }

    /// Builds a member from its head and value, removing the function and array sugar.
    #[inline(never)]
    fn member_finish(
        head: Box<MemberHead>,
        (mut value, mut depth): Node,
    ) -> Result<(Member, usize), Error> {
        let MemberHead {
            name,
            pos,
            array_def,
            params,
        } = *head;
        if let Some((params, params_pos, params_depth)) = params {
            value = Expr {
                pos: params_pos,
                kind: ExprKind::Lambda(params, Box::new(value)),
            };
            depth = depth.max(params_depth) + 1;
        }
        if let Some((index, index_pos, from, to)) = array_def {
            let param = Expr {
                pos: index_pos,
                kind: ExprKind::Ident(index),
            };
            let init = Expr {
                pos: index_pos,
                kind: ExprKind::Lambda(
                    Args {
                        positional: vec![param],
                        named: Vec::new(),
                    },
                    Box::new(value),
                ),
            };
            depth = depth.max(from.1).max(to.1) + 2;
            value = Expr {
                pos,
                kind: ExprKind::ArrayCtor(boxed(from), boxed(to), Box::new(init)),
            };
        }
        let depth = Self::check_tree_depth(pos, depth)?;
        Ok((Member { name, pos, value }, depth))
    }

    /// `(a, b, name = v)` or `{...}`; with `defining`, every argument must be an identifier.
    fn args(&mut self, defining: bool) -> Result<(Args, Pos, usize), Error> {
        let open = self.advance();
        let close = if open.is_punct("{") { "}" } else { ")" };
        let mut args = Args::default();
        let mut depth = 0;
        if !self.peek().is_punct(close) {
            loop {
                let (expr, expr_depth) = self.expression(0)?;
                let ident = match &expr.kind {
                    ExprKind::Ident(name) => Some(name.clone()),
                    _ => None,
                };
                if defining && ident.is_none() {
                    return Err(Error::new(expr.pos, "expected a parameter name"));
                }
                match ident {
                    Some(name) if self.peek().is_punct("=") => {
                        self.advance();
                        if args.named.iter().any(|(n, _, _)| *n == name) {
                            return Err(Error::new(
                                expr.pos,
                                format!("duplicate named argument '{name}'"),
                            ));
                        }
                        let (value, value_depth) = self.expression(0)?;
                        depth = depth.max(value_depth);
                        args.named.push((name, expr.pos, value));
                    }
                    _ => {
                        depth = depth.max(expr_depth);
                        args.positional.push(expr);
                    }
                }
                if !self.peek().is_punct(",") {
                    break;
                }
                self.advance();
            }
        }
        self.expect_punct(close)?;
        Ok((args, open.pos, depth + 1))
    }

    /// An expression whose infix operators all bind at least as tightly as `min_prec`.
    fn expression(&mut self, min_prec: u8) -> Result<Node, Error> {
        let pos = self.peek().pos;
        self.enter(pos)?;
        let result = self.expression_inner(min_prec);
        self.depth -= 1;
        result
    }

    fn expression_inner(&mut self, min_prec: u8) -> Result<Node, Error> {
        let mut node = self.operand()?;
        // Whether `node` is a chain built by this loop: a further operator of its precedence
        // extends it rather than nesting it (a parenthesised operand is never extended).
        let mut open_chain = false;
        while let Some((infix, prec)) = infix_of(self.peek()) {
            if prec < min_prec {
                break;
            }
            let extends = open_chain;
            // Only a regular infix operator leaves a chain that the next one may extend.
            open_chain = matches!(infix, Infix::Binary(_));
            node = self.infix(node, infix, prec, extends)?;
        }
        Ok(node)
    }

    // The helpers below are kept out of line so that the frames of the recursive path
    // (expression -> operand -> expression) stay small, even in unoptimized builds.

    /// Applies one infix or postfix operator to `left`, extending it when `open_chain` says it
    /// is a chain built by the caller's loop.
    #[inline(never)]
    fn infix(
        &mut self,
        left: Node,
        infix: Infix,
        prec: u8,
        open_chain: bool,
    ) -> Result<Node, Error> {
        match infix {
            Infix::Binary(op) => self.binary(left, op, open_chain),
            Infix::Colon => self.colon(left, prec),
            other => self.postfix(left, other, prec),
        }
    }

    /// `left op operand` for a regular infix operator: a new chain starting with `left`, or,
    /// with `extend` and an operator of the chain's precedence, one more link of `left`.
    #[inline(never)]
    fn binary(&mut self, left: Node, op: BinaryOp, extend: bool) -> Result<Node, Error> {
        let op_pos = self.advance().pos;
        let operand = self.expression(op.precedence() + 1)?;
        let link = ChainLink {
            op,
            pos: op_pos,
            operand: operand.0,
        };
        Self::chain_link(left, link, operand.1, extend)
    }

    /// `left` with `link` (whose operand is `operand_depth` deep) appended: one more link of
    /// `left` when `extend` and it is a chain of the link's precedence, else a new chain of
    /// `left` and the link. Out of line from [`binary`](Self::binary), which is on the
    /// recursive path, so that its frame stays small.
    #[inline(never)]
    fn chain_link(
        (left, depth): Node,
        link: ChainLink,
        operand_depth: usize,
        extend: bool,
    ) -> Result<Node, Error> {
        let precedence = link.op.precedence();
        let (first, mut links, depth) = match left.kind {
            ExprKind::Chain(first, links)
                if extend && links.last().map(|l| l.op.precedence()) == Some(precedence) =>
            {
                (first, links, depth.max(operand_depth + 1))
            }
            kind => {
                let first = Box::new(Expr {
                    pos: left.pos,
                    kind,
                });
                (first, Vec::new(), depth.max(operand_depth) + 1)
            }
        };
        let op_pos = link.pos;
        let depth = Self::check_tree_depth(op_pos, depth)?;
        links.push(link);
        // A chain is reported at its last operator, the root of the tree it stands for.
        let kind = ExprKind::Chain(first, links);
        Ok((Expr { pos: op_pos, kind }, depth))
    }

    /// `left : right`, flattened into one array.
    #[inline(never)]
    fn colon(&mut self, (left, depth): Node, prec: u8) -> Result<Node, Error> {
        let op_pos = self.advance().pos;
        let (right, right_depth) = self.expression(prec + 1)?;
        let (items, depth) = match left.kind {
            // One more element: the array gets no deeper than that element.
            ExprKind::Array(mut items) => {
                items.push(right);
                (items, depth.max(right_depth + 1))
            }
            other => {
                let left = Expr {
                    pos: left.pos,
                    kind: other,
                };
                (vec![left, right], depth.max(right_depth) + 1)
            }
        };
        // An array keeps the position of its first element.
        let first = items.first().map_or(op_pos, |e| e.pos);
        let depth = Self::check_tree_depth(first, depth)?;
        let kind = ExprKind::Array(items);
        Ok((Expr { pos: first, kind }, depth))
    }

    /// `.name`, `[index]`, `(args)`, `{args}` and `=>`.
    #[inline(never)]
    fn postfix(&mut self, (left, depth): Node, infix: Infix, prec: u8) -> Result<Node, Error> {
        let op_pos = self.peek().pos;
        let (kind, new_depth) = match infix {
            Infix::Dot => {
                self.advance();
                let (name, name_pos) = self.expect_ident("a member name after '.'")?;
                (ExprKind::Member(Box::new(left), name, name_pos), depth)
            }
            Infix::Index => {
                self.advance();
                let index = self.expression(0)?;
                self.expect_punct("]")?;
                let d = depth.max(index.1);
                (ExprKind::Index(Box::new(left), boxed(index)), d)
            }
            Infix::Call(brace) => {
                let (args, _, args_depth) = self.args(false)?;
                let d = depth.max(args_depth);
                (ExprKind::Call(Box::new(left), args, brace), d)
            }
            Infix::Arrow => {
                if !matches!(left.kind, ExprKind::Ident(_)) {
                    return Err(Error::new(
                        left.pos,
                        "a lambda takes exactly one parameter name before '=>'",
                    ));
                }
                self.advance();
                let body = self.expression(prec)?;
                let params = Args {
                    positional: vec![left],
                    named: Vec::new(),
                };
                // A lambda is reported at its parameter.
                let pos = params.positional.first().map_or(op_pos, |p| p.pos);
                let depth = Self::check_tree_depth(pos, depth.max(body.1) + 1)?;
                let kind = ExprKind::Lambda(params, boxed(body));
                return Ok((Expr { pos, kind }, depth));
            }
            Infix::Binary(op) => return self.binary((left, depth), op, false),
            Infix::Colon => return self.colon((left, depth), prec),
        };
        let depth = Self::check_tree_depth(op_pos, new_depth + 1)?;
        Ok((Expr { pos: op_pos, kind }, depth))
    }

    fn operand(&mut self) -> Result<Node, Error> {
        let token = self.advance();
        let pos = token.pos;
        let kind = match token.kind {
            TokKind::Number(n) => ExprKind::Number(n),
            TokKind::Str(s) => ExprKind::Str(s),
            TokKind::Ident(name) => ExprKind::Ident(name),
            TokKind::Macro(name) => ExprKind::Macro(name),
            TokKind::Keyword("true") => ExprKind::Bool(true),
            TokKind::Keyword("false") => ExprKind::Bool(false),
            TokKind::Punct("(") => {
                let inner = self.expression(0)?;
                self.expect_punct(")")?;
                return Ok(inner);
            }
            TokKind::Punct(p @ ("-" | "+" | "!")) => return self.unary(p, pos),
            TokKind::Punct(open @ ("[" | "{")) => return self.record(open, pos),
            TokKind::Punct("[|") => return self.fsharp_array(pos),
            TokKind::Keyword("if") => return self.conditional(pos),
            TokKind::Keyword("new") => return self.new_object(pos),
            TokKind::Keyword("array") => return self.array_ctor(pos),
            TokKind::Keyword("include") => return Err(include_error(pos)),
            TokKind::Bad(error) => return Err(*error),
            other => {
                return Err(Error::new(
                    pos,
                    format!("expected a value, found {}", token_text(&other)),
                ))
            }
        };
        Ok((Expr { pos, kind }, 1))
    }

    /// `-x`, `+x`, `!x`.
    #[inline(never)]
    fn unary(&mut self, p: &str, pos: Pos) -> Result<Node, Error> {
        let op = match p {
            "-" => UnaryOp::Neg,
            "+" => UnaryOp::Plus,
            _ => UnaryOp::Not,
        };
        let (inner, depth) = self.expression(UNARY_PRECEDENCE)?;
        let kind = ExprKind::Unary(op, Box::new(inner));
        Ok((Expr { pos, kind }, depth + 1))
    }

    /// A record literal after its opening bracket.
    #[inline(never)]
    fn record(&mut self, open: &str, pos: Pos) -> Result<Node, Error> {
        let close = if open == "[" { "]" } else { "}" };
        self.enter(pos)?;
        let result = self.record_members(pos, Some(close));
        self.depth -= 1;
        let (record, depth) = result?;
        let kind = ExprKind::Record(record);
        Ok((Expr { pos, kind }, depth))
    }

    /// `[| a; b; c |]` after its opening bracket.
    #[inline(never)]
    fn fsharp_array(&mut self, pos: Pos) -> Result<Node, Error> {
        let mut items = Vec::new();
        let mut depth = 0;
        if !self.peek().is_punct("|]") {
            loop {
                let (item, d) = self.expression(0)?;
                depth = depth.max(d);
                items.push(item);
                if !self.peek().is_punct(";") {
                    break;
                }
                self.advance();
            }
        }
        self.expect_punct("|]")?;
        let kind = ExprKind::Array(items);
        Ok((Expr { pos, kind }, depth + 1))
    }

    /// `if c then a else b` after `if`.
    #[inline(never)]
    fn conditional(&mut self, pos: Pos) -> Result<Node, Error> {
        let cond = self.expression(0)?;
        self.expect_keyword("then")?;
        let then = self.expression(0)?;
        self.expect_keyword("else")?;
        let otherwise = self.expression(0)?;
        let depth = cond.1.max(then.1).max(otherwise.1) + 1;
        let kind = ExprKind::If(boxed(cond), boxed(then), boxed(otherwise));
        Ok((Expr { pos, kind }, depth))
    }

    /// `new TYPE operand` after `new`.
    #[inline(never)]
    fn new_object(&mut self, pos: Pos) -> Result<Node, Error> {
        let (type_name, _) = self.expect_ident("a type name after 'new'")?;
        let arg_pos = self.peek().pos;
        self.enter(arg_pos)?;
        let arg = self.operand();
        self.depth -= 1;
        let (arg, depth) = arg?;
        let kind = ExprKind::New(type_name, Box::new(arg));
        Ok((Expr { pos, kind }, depth + 1))
    }

    /// `array[from..to] (init)` after `array`.
    #[inline(never)]
    fn array_ctor(&mut self, pos: Pos) -> Result<Node, Error> {
        self.expect_punct("[")?;
        let from = self.expression(0)?;
        self.expect_punct("..")?;
        let to = self.expression(0)?;
        self.expect_punct("]")?;
        self.expect_punct("(")?;
        let init = self.expression(0)?;
        self.expect_punct(")")?;
        let depth = from.1.max(to.1).max(init.1) + 1;
        let kind = ExprKind::ArrayCtor(boxed(from), boxed(to), boxed(init));
        Ok((Expr { pos, kind }, depth))
    }
}

/// The error of an `include`, which is not read: where a value should be, or in a record
/// whose members are looked up or listed ([`Record::include`]).
pub(crate) fn include_error(pos: Pos) -> Error {
    Error::new(
        pos,
        "'include' is not supported; paste the included text instead",
    )
}

fn token_text(kind: &TokKind) -> String {
    Token {
        kind: kind.clone(),
        pos: Pos::default(),
        line_initial: false,
    }
    .describe()
}

#[cfg(test)]
mod tests {
    use super::super::with_small_stack;
    use super::*;

    fn value(text: &str) -> Expr {
        let doc = parse(&format!("x = {text}")).unwrap();
        doc.members.into_iter().next().unwrap().value
    }

    /// The shape of an expression with every chain in parentheses (operators, numbers,
    /// names and unary operators only).
    fn shape(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Number(n) => format!("{n}"),
            ExprKind::Ident(name) => name.clone(),
            ExprKind::Bool(b) => format!("{b}"),
            ExprKind::Unary(UnaryOp::Not, inner) => format!("!{}", shape(inner)),
            ExprKind::Unary(_, inner) => format!("-{}", shape(inner)),
            ExprKind::Chain(first, links) => {
                let mut text = format!("({}", shape(first));
                for link in links {
                    text.push_str(&format!(" {} {}", link.op.symbol(), shape(&link.operand)));
                }
                text + ")"
            }
            other => other.describe().to_string(),
        }
    }

    #[test]
    fn precedence() {
        let e = value("1 + 2 * 3 == 7 && !false || x");
        assert_eq!(shape(&e), "((((1 + (2 * 3)) == 7) && !false) || x)");
        assert_eq!(shape(&value("a || b && c")), "(a || (b && c))");
        assert_eq!(shape(&value("1 << 2 + 3 >> 4")), "(1 << (2 + 3) >> 4)");
    }

    #[test]
    fn one_precedence_makes_one_chain() {
        assert_eq!(shape(&value("1 - 2 + 3 - 4")), "(1 - 2 + 3 - 4)");
        assert_eq!(
            shape(&value("a * b / c .* d % e ** f")),
            "(a * b / c .* d % e ** f)"
        );
        assert_eq!(
            shape(&value("a < b == c != d >= e")),
            "(a < b == c != d >= e)"
        );
        assert_eq!(shape(&value("a && b && c")), "(a && b && c)");
        assert_eq!(
            shape(&value("1 * 2 + 3 * 4 + 5")),
            "((1 * 2) + (3 * 4) + 5)"
        );
        assert_eq!(
            shape(&value("1 + 2 == 3 + 4 == 5")),
            "((1 + 2) == (3 + 4) == 5)"
        );
        // A parenthesised left operand stays a node of its own, as written.
        assert_eq!(shape(&value("(1 + 2) + 3")), "((1 + 2) + 3)");
        assert_eq!(shape(&value("1 + (2 + 3)")), "(1 + (2 + 3))");
        assert_eq!(shape(&value("-1 - -2")), "(-1 - -2)");
        // Lines continue a chain.
        assert_eq!(shape(&value("1\n + 2\n - 3")), "(1 + 2 - 3)");
    }

    #[test]
    fn a_chain_is_reported_at_its_last_operator() {
        let e = value("1 + 2 - 3");
        assert_eq!(e.pos, Pos::new(1, 11));
        let ExprKind::Chain(first, links) = &e.kind else {
            panic!("{e:?}")
        };
        assert_eq!(first.pos, Pos::new(1, 5));
        let at: Vec<_> = links.iter().map(|l| (l.op, l.pos, l.operand.pos)).collect();
        assert_eq!(
            at,
            [
                (BinaryOp::Add, Pos::new(1, 7), Pos::new(1, 9)),
                (BinaryOp::Sub, Pos::new(1, 11), Pos::new(1, 13)),
            ]
        );
    }

    /// A chain of `n` terms is one node: parsing, cloning, comparing and dropping it recurse
    /// once, not once per term, so 100,000 terms fit in a small stack.
    #[test]
    fn long_chains_are_flat() {
        let items = with_small_stack(|| {
            for (op, n) in [("+", 129), ("*", 1000), ("&&", 100_000), ("-", 100_000)] {
                let text = format!("x = (1){}", format!(" {op} (1)").repeat(n - 1));
                let doc = parse(&text).unwrap();
                let copy = doc.clone();
                assert_eq!(copy, doc);
                let ExprKind::Chain(_, links) = &doc.members[0].value.kind else {
                    panic!("{op}")
                };
                assert_eq!(links.len(), n - 1);
            }
            let array = format!("x = 1{}", " : 1".repeat(99_999));
            let doc = parse(&array).unwrap();
            let ExprKind::Array(items) = &doc.members[0].value.kind else {
                panic!()
            };
            items.len()
        });
        assert_eq!(items, 100_000);
    }

    #[test]
    fn colon_builds_flat_arrays() {
        let e = value("128:256:3");
        let ExprKind::Array(items) = e.kind else {
            panic!()
        };
        assert_eq!(items.len(), 3);
        let e = value("0.1*5 : 0.3");
        let ExprKind::Array(items) = e.kind else {
            panic!()
        };
        assert_eq!(shape(&items[0]), "(0.1 * 5)");
    }

    #[test]
    fn parentheses_only_group() {
        assert!(matches!(value("({ a = 1 })").kind, ExprKind::Record(_)));
        assert!(matches!(value("(1)").kind, ExprKind::Number(_)));
    }

    #[test]
    fn members_and_separators() {
        let doc = parse("a = 1; b = 2, c = 3\n d = [ e = 1 ]\nf = {}").unwrap();
        let names: Vec<_> = doc.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d", "f"]);
        assert_eq!(doc.members[3].pos, Pos::new(2, 2));
    }

    #[test]
    fn missing_separator_is_an_error_of_the_member() {
        let err = refused("a = 1 b = 2").unwrap();
        assert_eq!(err.pos(), Pos::new(1, 7));
        assert!(err.message().contains("';' or a line break"));
        // The rest of the line is the value's text: no member `b`.
        let doc = parse("a = 1 b = 2\nc = 3").unwrap();
        let names: Vec<_> = doc.members.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
    }

    /// The first error of the document or of a member's value kept as text (searched
    /// through the records of member values).
    fn refused(text: &str) -> Option<Error> {
        fn in_record(record: &Record) -> Option<Error> {
            record.members.iter().find_map(|m| match &m.value.kind {
                ExprKind::Unparsed(e) => Some((**e).clone()),
                ExprKind::Record(inner) => in_record(inner),
                _ => None,
            })
        }
        match parse(text) {
            Err(e) => Some(e),
            Ok(doc) => in_record(&doc),
        }
    }

    /// CNTK's legacy parser keeps a value as text and reads it only when asked: values that
    /// are not BrainScript are errors of their member, up to the line's end or the
    /// record's close, with brackets paired.
    #[test]
    fn legacy_text_is_an_error_of_its_member_only() {
        let text = "OutputDir = ./work\nmodel=$ModelDir$/03_Conv\nnodes = (ol, rmse)\n\
                    mask = 0x10\nr = [ p = 50%\n q = 1 ]\nok = 7";
        let doc = parse(text).unwrap();
        let shown: Vec<(String, String)> = doc
            .members
            .iter()
            .map(|m| {
                let kind = match &m.value.kind {
                    ExprKind::Unparsed(e) => format!("{}: {}", e.pos(), e.message()),
                    ExprKind::Record(r) => format!("record of {}", r.members.len()),
                    other => other.describe().to_string(),
                };
                (m.name.clone(), kind)
            })
            .collect();
        let expected = [
            ("OutputDir", "1:13: expected a value, found '.'"),
            (
                "model",
                "2:18: invalid number '03_Conv' (quote it if it is a name or a path)",
            ),
            ("nodes", "3:12: expected ')', found ','"),
            (
                "mask",
                "4:8: invalid number '0x10' (quote it if it is a name or a path)",
            ),
            ("r", "record of 2"),
            ("ok", "number"),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(shown, expected);
        // `50%` waits for an operand on the next line; the line's text is still its own.
        let ExprKind::Record(r) = &doc.members[4].value.kind else {
            unreachable!()
        };
        assert!(matches!(r.members[0].value.kind, ExprKind::Unparsed(_)));
        assert_eq!(r.members[1].name, "q");
        // Brackets that do not pair up, an empty value or a line that is not `name = ...`
        // stay the document's errors, as in CNTK.
        for text in [
            "a = (1]\nb = 2",
            "a = [ b = ( ]",
            "a =\n",
            "a = 1\n2 = b",
            "a = 1 )",
        ] {
            assert!(parse(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn include_is_kept_as_the_records_include() {
        let doc = parse("n = [ include \"Shared.bs\"\n a = 1 ]\nb = 2").unwrap();
        let ExprKind::Record(n) = &doc.members[0].value.kind else {
            unreachable!()
        };
        assert_eq!(n.include, Some(Pos::new(1, 7)));
        assert_eq!(n.members.len(), 1);
        assert_eq!(doc.include, None);
        let err = parse("include = other.cntk").unwrap_err();
        assert!(
            err.message().contains("'include' is not supported"),
            "{err}"
        );
    }

    #[test]
    fn expressions_continue_across_lines() {
        let doc = parse("a = 1\n  + 2\nb = f\n (3)").unwrap();
        assert!(matches!(doc.members[0].value.kind, ExprKind::Chain(..)));
        assert!(matches!(doc.members[1].value.kind, ExprKind::Call(..)));
    }

    #[test]
    fn function_members_become_lambdas() {
        let doc = parse("f(x, y, opt = 1) = x + y\nF {m, n} = { W = m }.W").unwrap();
        let ExprKind::Lambda(params, _) = &doc.members[0].value.kind else {
            panic!()
        };
        assert_eq!(params.positional.len(), 2);
        assert_eq!(params.named.len(), 1);
        let ExprKind::Lambda(_, body) = &doc.members[1].value.kind else {
            panic!()
        };
        assert!(matches!(body.kind, ExprKind::Member(..)));
        assert!(parse("f(1) = 2").is_err());
    }

    #[test]
    fn array_definitions() {
        let doc = parse("arr[i:1..3] = i * 2").unwrap();
        assert!(matches!(doc.members[0].value.kind, ExprKind::ArrayCtor(..)));
        let e = value("array[1..L] (l => l + 1)");
        let ExprKind::ArrayCtor(_, _, init) = e.kind else {
            panic!()
        };
        assert!(matches!(init.kind, ExprKind::Lambda(..)));
    }

    #[test]
    fn calls_lambdas_new_and_access() {
        assert!(matches!(
            value("DenseLayer {1024, activation = ReLU} (v)").kind,
            ExprKind::Call(_, _, false)
        ));
        assert!(matches!(value("(x => Log(x))").kind, ExprKind::Lambda(..)));
        assert!(matches!(
            value("new ComputationNetwork { a = 1 }").kind,
            ExprKind::New(..)
        ));
        assert!(matches!(value("{ x = 13 }.x").kind, ExprKind::Member(..)));
        assert!(matches!(value("a[1]").kind, ExprKind::Index(..)));
        assert!(matches!(value("[| 1; 2 |]").kind, ExprKind::Array(_)));
        assert_eq!(shape(&value("r with s")), "(r with s)");
        assert!(matches!(value("$DeviceId$").kind, ExprKind::Macro(_)));
    }

    #[test]
    fn if_then_else() {
        let e = value("if a == 1\n then 'x'\n else 'y' + 'z'");
        let ExprKind::If(_, _, otherwise) = e.kind else {
            panic!()
        };
        assert_eq!(shape(&otherwise), "(string + string)");
    }

    #[test]
    fn duplicate_members_are_an_error_of_the_member() {
        let err = refused("a = 1\na = 2").unwrap();
        assert_eq!(err.pos(), Pos::new(2, 1));
        assert!(err.message().contains("duplicate member 'a'"));
        assert_eq!(parse("a = 1\na = 2").unwrap().members.len(), 1);
        // Names are case-sensitive in the syntax; the reader checks case collisions itself.
        assert!(parse("a = 1\nA = 2").is_ok());
    }

    #[test]
    fn unclosed_and_mismatched_records() {
        let err = parse("r = [\n a = 1\n").unwrap_err();
        assert_eq!(err.pos(), Pos::new(1, 5));
        assert!(parse("r = [ a = 1 }").is_err());
        assert!(parse("r = )").is_err());
    }

    #[test]
    fn nesting_is_capped() {
        let deep = format!("x = {}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(refused(&deep).unwrap().message().contains("nested deeper"));
        let records = format!("x = {}{}", "[ a = ".repeat(5_000), "]".repeat(5_000));
        assert!(refused(&records).is_some());
        let right_nested = format!("x = {}1{}", "1 + (".repeat(10_000), ")".repeat(10_000));
        assert!(refused(&right_nested)
            .unwrap()
            .message()
            .contains("nested deeper"));
        let unary = format!("x = {}1", "-".repeat(10_000));
        assert!(refused(&unary).is_some());
        // A long chain of one precedence is not nesting.
        let chain = format!("x = 1{}", " + 1".repeat(10_000));
        assert!(refused(&chain).is_none());
    }

    /// Parentheses nested as deep as before are refused at the same place with the same
    /// message, whether or not each level holds a long chain.
    #[test]
    fn chains_do_not_change_the_nesting_cap() {
        // `levels` parentheses, each closing a chain of `terms` + 1 terms.
        let nested = |levels: usize, terms: usize| {
            let sum = " + 1".repeat(terms);
            format!(
                "x = {}1{}",
                "(".repeat(levels),
                format!("{sum})").repeat(levels)
            )
        };
        let message = format!("expression nested deeper than {MAX_DEPTH} levels");
        // Alone, the innermost `1` is the 129th level (the member's value is the first).
        let err = refused(&nested(MAX_DEPTH, 0)).unwrap();
        assert_eq!((err.message(), err.pos()), (&*message, Pos::new(1, 133)));
        assert!(refused(&nested(MAX_DEPTH - 1, 0)).is_none());
        // In a chain, the operand of the innermost `+` is one level deeper than its `1`.
        for terms in [1, 200] {
            let err = refused(&nested(MAX_DEPTH - 1, terms)).unwrap();
            assert_eq!((err.message(), err.pos()), (&*message, Pos::new(1, 136)));
            assert!(refused(&nested(MAX_DEPTH - 2, terms)).is_none());
        }
    }

    /// The depth cap keeps the worst inputs within a small stack, even unoptimized.
    #[test]
    fn worst_cases_fit_in_one_mebibyte_of_stack() {
        let inputs = [
            format!("x = {}1{}", "(".repeat(1000), ")".repeat(1000)),
            format!("x = {}1{}", "1 + (".repeat(1000), ")".repeat(1000)),
            format!("x = {}1{}", "[ a = ".repeat(1000), "]".repeat(1000)),
            format!("x = {}1{}", "f(".repeat(1000), ")".repeat(1000)),
            format!("x = {}1", "-".repeat(1000)),
            format!("x = {}1", "if true then ".repeat(1000)),
        ];
        let all_refused =
            with_small_stack(move || inputs.iter().all(|text| refused(text).is_some()));
        assert!(all_refused);
    }
}
