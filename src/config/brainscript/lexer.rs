//! Lexer: turns configuration text into tokens, each with its line:column and a flag telling
//! whether it is the first token of its line (newlines separate record members). Comments
//! (`#` and `//` to the end of the line, `/* ... */`) and white space are skipped.

use super::error::{Error, Pos};

/// Reserved words of BrainScript.
const KEYWORDS: [&str; 9] = [
    "include", "new", "with", "true", "false", "if", "then", "else", "array",
];

/// Two-character punctuation, tried before the one-character ones.
const PUNCT2: [&str; 14] = [
    "[|", "|]", "**", ".*", "||", "&&", "<<", ">>", "==", ">=", "!=", "<=", "=>", "..",
];

/// One-character punctuation.
const PUNCT1: [&str; 19] = [
    "=", ";", ",", "[", "]", "(", ")", "{", "}", "+", "-", "*", "/", "%", "!", "<", ">", ":", ".",
];

/// What a token is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum TokKind {
    /// A number literal (always a double).
    Number(f64),
    /// A string literal, without its quotes.
    Str(String),
    /// An identifier.
    Ident(String),
    /// A reserved word.
    Keyword(&'static str),
    /// A legacy `$name$` macro, holding `name`.
    Macro(String),
    /// Punctuation or an operator.
    Punct(&'static str),
    /// Text that is no BrainScript token (`03_name`, `@`, a lone `$`), with the error it
    /// gives if parsed: CNTK's legacy parser keeps any value as text, so such text in a
    /// member the reader never reads is no error ([`super::ExprKind::Unparsed`]).
    Bad(Box<Error>),
    /// End of the text.
    Eof,
}

/// One token with its position.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Token {
    pub kind: TokKind,
    pub pos: Pos,
    /// True when a line break (or the start of the text) precedes this token.
    pub line_initial: bool,
}

impl Token {
    /// Whether this token is the punctuation `p`.
    pub fn is_punct(&self, p: &str) -> bool {
        matches!(self.kind, TokKind::Punct(q) if q == p)
    }

    /// Whether this token is the keyword `k`.
    pub fn is_keyword(&self, k: &str) -> bool {
        matches!(self.kind, TokKind::Keyword(q) if q == k)
    }

    /// A short description for error messages.
    pub fn describe(&self) -> String {
        match &self.kind {
            TokKind::Number(n) => format!("number {n}"),
            TokKind::Str(_) => "string".to_string(),
            TokKind::Ident(s) => format!("identifier '{s}'"),
            TokKind::Keyword(k) => format!("'{k}'"),
            TokKind::Macro(m) => format!("macro '${m}$'"),
            TokKind::Punct(p) => format!("'{p}'"),
            TokKind::Bad(error) => error.message().to_string(),
            TokKind::Eof => "end of file".to_string(),
        }
    }
}

/// Splits `text` into tokens; the last token is always [`TokKind::Eof`].
pub(crate) fn tokenize(text: &str) -> Result<Vec<Token>, Error> {
    let mut lexer = Lexer {
        text,
        bytes: text.as_bytes(),
        i: 0,
        line: 1,
        line_start: 0,
        line_initial: true,
    };
    // A UTF-8 byte order mark is not part of the configuration.
    if text.starts_with('\u{feff}') {
        lexer.i = '\u{feff}'.len_utf8();
        lexer.line_start = lexer.i;
    }
    let mut tokens = Vec::new();
    loop {
        let token = lexer.next_token()?;
        let done = token.kind == TokKind::Eof;
        tokens.push(token);
        if done {
            return Ok(tokens);
        }
    }
}

struct Lexer<'t> {
    text: &'t str,
    bytes: &'t [u8],
    i: usize,
    line: u32,
    line_start: usize,
    line_initial: bool,
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

impl Lexer<'_> {
    fn pos(&self) -> Pos {
        let col = self.i.saturating_sub(self.line_start) + 1;
        Pos::new(self.line, u32::try_from(col).unwrap_or(u32::MAX))
    }

    fn peek(&self) -> Option<char> {
        self.text.get(self.i..).and_then(|s| s.chars().next())
    }

    fn peek_byte(&self, ahead: usize) -> u8 {
        self.bytes.get(self.i + ahead).copied().unwrap_or(0)
    }

    /// Consumes one character, keeping track of lines.
    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.i += c.len_utf8();
        if c == '\n' {
            self.line = self.line.saturating_add(1);
            self.line_start = self.i;
            self.line_initial = true;
        }
        Some(c)
    }

    /// Skips white space and comments.
    fn skip_trivia(&mut self) -> Result<(), Error> {
        loop {
            match self.peek() {
                Some(c) if c.is_whitespace() => {
                    self.bump();
                }
                Some('#') => self.skip_line(),
                Some('/') if self.peek_byte(1) == b'/' => self.skip_line(),
                Some('/') if self.peek_byte(1) == b'*' => {
                    let start = self.pos();
                    self.i += 2;
                    loop {
                        match self.peek() {
                            None => return Err(Error::new(start, "comment without closing '*/'")),
                            Some('*') if self.peek_byte(1) == b'/' => {
                                self.i += 2;
                                break;
                            }
                            Some(_) => {
                                self.bump();
                            }
                        }
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn skip_line(&mut self) {
        while let Some(c) = self.peek() {
            if c == '\n' {
                return;
            }
            self.bump();
        }
    }

    fn next_token(&mut self) -> Result<Token, Error> {
        self.skip_trivia()?;
        let pos = self.pos();
        let line_initial = std::mem::replace(&mut self.line_initial, false);
        let kind = match self.peek() {
            None => TokKind::Eof,
            Some(c) if c.is_ascii_digit() => self.number(pos),
            Some('.') if self.peek_byte(1).is_ascii_digit() => self.number(pos),
            Some(c) if is_ident_start(c) => {
                let word = self.word();
                match KEYWORDS.iter().find(|k| **k == word) {
                    Some(k) => TokKind::Keyword(k),
                    None => TokKind::Ident(word.to_string()),
                }
            }
            Some(q @ ('"' | '\'')) => self.string(q, pos)?,
            Some('$') => self.macro_ref(pos),
            Some(c) => self.punct(c, pos),
        };
        Ok(Token {
            kind,
            pos,
            line_initial,
        })
    }

    fn word(&mut self) -> &str {
        let start = self.i;
        while let Some(c) = self.peek() {
            if !is_ident_char(c) {
                break;
            }
            self.i += c.len_utf8();
        }
        self.text.get(start..self.i).unwrap_or("")
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.peek_byte(0).is_ascii_digit() {
            self.i += 1;
        }
        self.i - start
    }

    /// `13`, `3.14`, `.5`, `1.`, `1e30`, `2.5E-3`; `1..3` is `1`, `..`, `3`.
    fn number(&mut self, pos: Pos) -> TokKind {
        let start = self.i;
        self.digits();
        if self.peek_byte(0) == b'.' && self.peek_byte(1) != b'.' {
            self.i += 1;
            self.digits();
        }
        if matches!(self.peek_byte(0), b'e' | b'E') {
            let sign = usize::from(matches!(self.peek_byte(1), b'+' | b'-'));
            if self.peek_byte(1 + sign).is_ascii_digit() {
                self.i += 1 + sign;
                self.digits();
            }
        }
        let literal = self.text.get(start..self.i).unwrap_or("");
        if self.peek().is_some_and(is_ident_char) {
            let rest = self.word().to_string();
            return bad(
                pos,
                format!("invalid number '{literal}{rest}' (quote it if it is a name or a path)"),
            );
        }
        match literal.parse::<f64>() {
            Ok(n) => TokKind::Number(n),
            Err(_) => bad(pos, format!("invalid number '{literal}'")),
        }
    }

    /// A string in `"` or `'`, without escapes, possibly spanning lines.
    fn string(&mut self, quote: char, pos: Pos) -> Result<TokKind, Error> {
        self.i += 1;
        let start = self.i;
        loop {
            match self.peek() {
                None => return Err(Error::new(pos, "string without closing quotation mark")),
                Some(c) if c == quote => {
                    let s = self.text.get(start..self.i).unwrap_or("").to_string();
                    self.i += 1;
                    // A line break inside the string does not separate members.
                    self.line_initial = false;
                    return Ok(TokKind::Str(s));
                }
                Some(_) => {
                    self.bump();
                }
            }
        }
    }

    /// A legacy `$name$` macro reference.
    fn macro_ref(&mut self, pos: Pos) -> TokKind {
        self.i += 1;
        let name = self.word().to_string();
        if name.is_empty() || self.peek() != Some('$') {
            return bad(pos, "unexpected character '$'".to_string());
        }
        self.i += 1;
        TokKind::Macro(name)
    }

    fn punct(&mut self, c: char, pos: Pos) -> TokKind {
        let rest = self.text.get(self.i..).unwrap_or("");
        if let Some(p) = PUNCT2.iter().find(|p| rest.starts_with(**p)) {
            self.i += 2;
            return TokKind::Punct(p);
        }
        if let Some(p) = PUNCT1.iter().find(|p| rest.starts_with(**p)) {
            self.i += 1;
            return TokKind::Punct(p);
        }
        self.i += c.len_utf8();
        bad(pos, format!("unexpected character '{c}'"))
    }
}

/// A [`TokKind::Bad`] token's kind.
fn bad(pos: Pos, message: String) -> TokKind {
    TokKind::Bad(Box::new(Error::new(pos, message)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<TokKind> {
        tokenize(text)
            .unwrap()
            .into_iter()
            .map(|t| t.kind)
            .collect()
    }

    #[test]
    fn numbers() {
        assert_eq!(
            kinds("13 42 3.1415926538 1e30 .5 2.5E-3 1."),
            vec![
                TokKind::Number(13.0),
                TokKind::Number(42.0),
                TokKind::Number(3.1415926538),
                TokKind::Number(1e30),
                TokKind::Number(0.5),
                TokKind::Number(2.5e-3),
                TokKind::Number(1.0),
                TokKind::Eof
            ]
        );
    }

    #[test]
    fn range_is_not_a_decimal_point() {
        assert_eq!(
            kinds("1..3"),
            vec![
                TokKind::Number(1.0),
                TokKind::Punct(".."),
                TokKind::Number(3.0),
                TokKind::Eof
            ]
        );
    }

    #[test]
    fn number_followed_by_letters_is_a_bad_token() {
        let toks = tokenize("x = 28x28").unwrap();
        let TokKind::Bad(err) = &toks[2].kind else {
            panic!("{toks:?}")
        };
        assert_eq!(err.pos(), Pos::new(1, 5));
        assert!(err.message().contains("28x28"));
        assert_eq!(toks[3].kind, TokKind::Eof);
    }

    #[test]
    fn strings_span_lines_and_keep_hashes() {
        let toks = tokenize("a = 'x # y\nz' b").unwrap();
        assert_eq!(toks[2].kind, TokKind::Str("x # y\nz".into()));
        assert_eq!(toks[2].pos, Pos::new(1, 5));
        assert_eq!(toks[3].pos, Pos::new(2, 4));
        assert!(!toks[3].line_initial);
        assert_eq!(
            kinds("\"He'd\""),
            vec![TokKind::Str("He'd".into()), TokKind::Eof]
        );
    }

    #[test]
    fn unterminated_string() {
        let err = tokenize("a = \"abc\n").unwrap_err();
        assert_eq!(err.pos(), Pos::new(1, 5));
        assert!(err.message().contains("closing quotation"));
    }

    #[test]
    fn comments_are_skipped() {
        assert_eq!(
            kinds("a # c\n// d\n/* e\n f */ b"),
            vec![
                TokKind::Ident("a".into()),
                TokKind::Ident("b".into()),
                TokKind::Eof
            ]
        );
        assert!(tokenize("/* open").is_err());
    }

    #[test]
    fn operators_keywords_and_macros() {
        assert_eq!(
            kinds("x.*y => [| |] == != <= >= && || if then else new $Dir$"),
            vec![
                TokKind::Ident("x".into()),
                TokKind::Punct(".*"),
                TokKind::Ident("y".into()),
                TokKind::Punct("=>"),
                TokKind::Punct("[|"),
                TokKind::Punct("|]"),
                TokKind::Punct("=="),
                TokKind::Punct("!="),
                TokKind::Punct("<="),
                TokKind::Punct(">="),
                TokKind::Punct("&&"),
                TokKind::Punct("||"),
                TokKind::Keyword("if"),
                TokKind::Keyword("then"),
                TokKind::Keyword("else"),
                TokKind::Keyword("new"),
                TokKind::Macro("Dir".into()),
                TokKind::Eof
            ]
        );
    }

    #[test]
    fn positions_and_line_initial_flags() {
        let toks = tokenize("a = 1\n  bb=2").unwrap();
        assert_eq!(toks[0].pos, Pos::new(1, 1));
        assert!(toks[0].line_initial);
        assert!(!toks[1].line_initial);
        assert_eq!(toks[3].pos, Pos::new(2, 3));
        assert!(toks[3].line_initial);
        assert_eq!(toks[5].pos, Pos::new(2, 6));
    }

    #[test]
    fn bad_characters_are_bad_tokens_of_their_own() {
        let bad = |text: &str| -> Vec<String> {
            let toks = tokenize(text).unwrap();
            toks.iter()
                .filter_map(|t| match &t.kind {
                    TokKind::Bad(e) => Some(e.message().to_string()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(bad("a = @b"), ["unexpected character '@'"]);
        assert_eq!(bad("a = $x"), ["unexpected character '$'"]);
        assert_eq!(bad("a = | 1"), ["unexpected character '|'"]);
        // An unclosed string or comment is still the document's error.
        assert!(tokenize("a = 'x").is_err());
        assert!(tokenize("a = /* x").is_err());
    }

    #[test]
    fn never_panics_on_odd_input() {
        for text in [
            "",
            "\u{feff}",
            "é = 'ü'",
            "\"",
            "1e",
            "1e+",
            ".",
            "..",
            "$$",
            "\r\n",
        ] {
            let _ = tokenize(text);
        }
    }
}
