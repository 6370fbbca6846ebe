//! The BrainScript configuration language (seed 002): a lexer and parser for the whole
//! expression language, so that any real CNTK configuration file parses, and a lazy evaluator
//! for the immediate values a reader section needs.
//!
//! Parsing is complete; evaluation is deliberately partial. Numbers, strings, booleans,
//! records, arrays, arithmetic, comparisons, logic, conditionals, member references (searched
//! outward through enclosing records, in any declaration order), member access and indexing
//! are evaluated. Function calls, lambdas, `new`, `$macro$`s and the like parse, but evaluating
//! one is an error naming the construct and its position. Because evaluation is lazy and
//! driven by the caller, such constructs in members the reader never reads are harmless.
//!
//! ```
//! use ctf_reader::config::brainscript::{parse, Evaluator, Value};
//!
//! let doc = parse("dim = w * h\nw = 28; h = 28\nnet = new ComputationNetwork { }").unwrap();
//! let mut eval = Evaluator::new(&doc);
//! let root = eval.root();
//! match eval.get(&root, "dim").unwrap() {
//!     Some(Value::Number(n)) => assert_eq!(n, 784.0),
//!     _ => unreachable!(),
//! }
//! ```

mod ast;
mod error;
mod eval;
mod lexer;
mod parser;

pub use ast::{Args, BinaryOp, ChainLink, Expr, ExprKind, Member, Record, UnaryOp};
pub use error::{Error, Pos};
pub use eval::{Evaluator, MemberRef, RecordValue, Value};
pub(crate) use parser::include_error;
pub use parser::parse;

/// Deepest nesting of expressions and of chained member references that is accepted; beyond
/// it, parsing or evaluation fails with a clear error instead of exhausting the stack. A run of
/// infix operators of one precedence (`a + b - c + ...`) or of `:` is one level however long it
/// is ([`ExprKind::Chain`], [`ExprKind::Array`]).
pub const MAX_DEPTH: usize = 128;

/// Runs `f` on a thread with 1 MiB of stack and returns its result, for the tests that show
/// that the worst inputs (nesting up to the cap, chains of 100,000 terms) fit in a small
/// stack.
#[cfg(test)]
fn with_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let worker = std::thread::Builder::new().stack_size(1 << 20);
    worker.spawn(f).unwrap().join().unwrap()
}
