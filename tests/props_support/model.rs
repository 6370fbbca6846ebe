//! A random VALID dataset, its rendering to CTF text with random (valid) variations, and the
//! sequences the text must parse to, derived from the model (never from the parser).

use ctf_reader::parser::StreamOptions;
use ctf_reader::InputConfig;

use super::entropy::Src;
use super::grammar::{decrement, exact_decimal, is_number, is_ws, midpoint};

/// One configured input.
#[derive(Clone, Debug)]
pub struct InputSpec {
    /// Name in the configuration.
    pub name: String,
    /// Name written in the data (may equal `name`).
    pub alias: String,
    /// Sparse or dense.
    pub sparse: bool,
    /// Dimension.
    pub dim: usize,
    /// Percent chance that a value is a small integer (0 to 255, often 1), so that columns
    /// stay in their narrow storage for long runs before a wider value moves them on.
    pub small_values: u32,
    /// Percent chance that a dense value is `0`, each then followed by a single space most
    /// of the time (as in pixel data), so that runs of zeros meet every kind of end: the
    /// dim, a `|`, the line end, other whitespace.
    pub zeros: u32,
    /// Sparse: each sample lists its indices in increasing order (as most sparse data does),
    /// so that columns keep their indices as steps within the sample for long runs; with a
    /// large dim, steps past `u16::MAX` then widen them part way through.
    pub sorted: bool,
}

impl InputSpec {
    /// The crate's configuration of this input.
    pub fn config(&self) -> InputConfig {
        let c = if self.sparse {
            InputConfig::sparse(&self.name, self.dim)
        } else {
            InputConfig::dense(&self.name, self.dim)
        };
        c.with_alias(&self.alias)
    }
}

/// How sequences are delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Explicit ids; sequences of 1-5 lines.
    Ids,
    /// The first non-blank line has no id: every line is a sequence (later ids ignored).
    Lines,
    /// `skip_sequence_ids`: ids are written but ignored.
    SkipIds,
}

/// The values of one sample, as the tokens written in the file.
#[derive(Clone, Debug)]
pub enum Values {
    /// Dense value tokens (possibly fewer than dim: zero-padded with a warning).
    Dense(Vec<String>),
    /// Sparse entries: index as written, index, value token.
    Sparse(Vec<(String, u32, String)>),
}

/// One sequence: its id and per line the samples `(input, values)` (each input at most once).
#[derive(Clone, Debug)]
pub struct Seq {
    /// Id (used in id mode).
    pub id: u64,
    /// Lines of samples.
    pub lines: Vec<Vec<(usize, Values)>>,
}

/// A valid dataset.
#[derive(Clone, Debug)]
pub struct Dataset {
    /// Configured inputs.
    pub inputs: Vec<InputSpec>,
    /// Id or line mode.
    pub mode: Mode,
    /// Sequences in file order.
    pub seqs: Vec<Seq>,
}

impl Dataset {
    /// The crate's configuration of the inputs.
    pub fn configs(&self) -> Vec<InputConfig> {
        self.inputs.iter().map(InputSpec::config).collect()
    }
}

const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// Printable ASCII except `|`.
fn name_byte(src: &mut Src) -> u8 {
    let b = 0x21 + src.below(0x7f - 0x21) as u8;
    if b == b'|' {
        b'_'
    } else {
        b
    }
}

/// An input name: printable ASCII, no `|`, not starting with `#`.
fn gen_name(src: &mut Src) -> String {
    let len = src.range(1, 6);
    let mut s = String::new();
    for i in 0..len {
        let b = if src.chance(70) || i == 0 && src.chance(50) {
            *src.pick(LETTERS)
        } else {
            name_byte(src)
        };
        let b = if i == 0 && b == b'#' { b'h' } else { b };
        s.push(char::from(b));
    }
    if s.is_empty() || s.starts_with('#') {
        s.insert(0, 'n');
    }
    s
}

fn unique_name(src: &mut Src, taken: &[String]) -> String {
    let mut name = gen_name(src);
    let mut n = 0;
    while taken.contains(&name) {
        name = format!("{name}{n}");
        n += 1;
    }
    name
}

fn digits(src: &mut Src, n: usize) -> String {
    (0..n)
        .map(|_| char::from(b'0' + src.below(10) as u8))
        .collect()
}

fn sign(src: &mut Src) -> &'static str {
    const SIGNS: [&str; 4] = ["", "", "-", "+"];
    SIGNS[src.below(SIGNS.len())]
}

const SPECIALS: &[&str] = &[
    "5.",
    "+1",
    "02.0",
    "1E-05",
    "-6.3423e+015",
    "1e5",
    "0.1",
    "3.4028235e38",
    "-3.4028235e38",
    "3.4028235677973366e38",
    "1.17549435e-38",
    "1.1754942e-38",
    "1e-45",
    "1.4e-45",
    "7e-46",
    "1e-50",
    "2.2250738585072014e-308",
    "2.2250738585072011e-308",
    "4.9e-324",
    "2.4703282292062328e-324",
    "1.7976931348623157e308",
    "1.7976931348623158e308",
    "9007199254740993",
    "9007199254740992.5",
    "16777217",
    "33554435",
    "0.30000000000000004",
    "123456789012345678901234567890",
    "18446744073709551615",
    "18446744073709551616",
    "00000000000000000000000001",
    "1.00000000000000000000000000000000000000001",
    "0.000000000000000000000000000000000000000000000000001e51",
    "4503599627370496.5",
    "4503599627370497.5",
    "1e22",
    "1e23",
    "8.589973e9",
    "0e99999999999999999999",
    "1e-99999999999999999999",
    "1e-00000000000000000000000000001",
    "-0.0",
    "1090544144181609348835077142190",
    "2.0000001192092896",
    "1.000000059604644775390625",
    "1.00000005960464477539062501",
    "1.00000005960464477539062499",
];

fn gen_float_bits32(src: &mut Src) -> f32 {
    let bits = if src.chance(50) {
        let exp = (127 - 30 + src.below(61)) as u32;
        (src.u32() & 0x807f_ffff) | (exp << 23)
    } else {
        src.u32()
    };
    let x = f32::from_bits(bits);
    if x.is_finite() {
        x
    } else {
        1.5
    }
}

fn gen_float_bits64(src: &mut Src) -> f64 {
    let bits = if src.chance(50) {
        let exp = (1023 - 70 + src.below(141)) as u64;
        (src.u64() & 0x800f_ffff_ffff_ffff) | (exp << 52)
    } else {
        src.u64()
    };
    let x = f64::from_bits(bits);
    if x.is_finite() {
        x
    } else {
        2.5
    }
}

/// A decimal just at, above or below the midpoint between two adjacent floats.
fn halfway(src: &mut Src, f64_format: bool) -> String {
    let (m, e2) = if f64_format {
        let x = gen_float_bits64(src).abs();
        let bits = x.to_bits();
        midpoint((bits >> 52) as u32, bits & ((1 << 52) - 1), 52, 1075)
    } else {
        let x = gen_float_bits32(src).abs();
        let bits = x.to_bits();
        midpoint(bits >> 23, u64::from(bits & ((1 << 23) - 1)), 23, 150)
    };
    let exact = exact_decimal(m, e2);
    let s = match src.below(3) {
        0 => exact,
        1 => {
            if exact.contains('.') {
                exact + "0000000001"
            } else {
                exact + ".000001"
            }
        }
        _ => {
            if exact.contains('.') {
                assert!(exact.ends_with('5'), "odd multiple of 5^k: {exact}");
                format!("{}4999999999", &exact[..exact.len() - 1])
            } else {
                decrement(&exact) + ".999999"
            }
        }
    };
    format!("{}{s}", if src.chance(30) { "-" } else { "" })
}

/// A number token of the grammar, before decoration.
fn base_token(src: &mut Src) -> String {
    match src.below(13) {
        0 => src.below(100).to_string(),
        1 => {
            let n = src.range(1, 20);
            format!("{}{}", sign(src), digits(src, n))
        }
        2 => {
            let (i, f) = (src.range(1, 6), src.below(11));
            format!("{}{}.{}", sign(src), digits(src, i), digits(src, f))
        }
        3 => {
            let mut s = sign(src).to_string();
            let i = src.range(1, 4);
            s += &digits(src, i);
            if src.chance(50) {
                let f = src.range(1, 6);
                s += &format!(".{}", digits(src, f));
            }
            s.push(*src.pick(&['e', 'E']));
            s += sign(src);
            let exp = if src.chance(80) {
                src.below(60)
            } else {
                src.below(400)
            };
            let zeros = src.below(3);
            s += &format!("{}{exp}", "0".repeat(zeros));
            s
        }
        4 => src
            .pick(&[
                "-0",
                "-0.0",
                "-0e0",
                "-0.000E+00",
                "-00",
                "-0.",
                "+0",
                "0e-400",
                "-0e99999999999999999999",
            ])
            .to_string(),
        5 => {
            let x = gen_float_bits32(src);
            match src.below(4) {
                0 => format!("{x}"),
                1 => format!("{x:e}"),
                2 => format!("{x:?}"),
                _ => format!("{x:E}"),
            }
        }
        6 => {
            let x = gen_float_bits64(src);
            match src.below(4) {
                0 => format!("{x}"),
                1 => format!("{x:e}"),
                2 => format!("{x:?}"),
                _ => format!("{x:E}"),
            }
        }
        7 => src.pick(SPECIALS).to_string(),
        8 => {
            let n = src.range(20, 80);
            let mut s = digits(src, n);
            let dot = src.range(1, n);
            s.insert(dot, '.');
            if dot < n && src.chance(50) {
                let e = src.below(80) as i32 - 40;
                s += &format!("e{e}");
            }
            format!("{}{s}", sign(src))
        }
        9 => halfway(src, false),
        10 => halfway(src, true),
        11 => {
            let x = gen_float_bits64(src);
            let prec = src.below(25);
            format!("{x:.prec$}")
        }
        _ => {
            let x = gen_float_bits32(src);
            let prec = src.below(12);
            format!("{x:.prec$e}")
        }
    }
}

/// Value-preserving variations of a token: `+` sign, leading zeros, `5.`, `E`, exponent
/// sign and leading zeros, trailing fraction zeros, `e0`.
fn decorate(src: &mut Src, tok: String) -> String {
    if !src.chance(40) {
        return tok;
    }
    let b = tok.as_bytes();
    let (mut sign, rest) = match b[0] {
        b'+' | b'-' => (tok[..1].to_string(), &tok[1..]),
        _ => (String::new(), &tok[..]),
    };
    let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    let mut int = rest[..int_len].to_string();
    let mut rest = &rest[int_len..];
    let mut frac = None;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(u8::is_ascii_digit).count();
        frac = Some(r[..n].to_string());
        rest = &r[n..];
    }
    let mut exp = None;
    if !rest.is_empty() {
        let e = rest.as_bytes()[0] as char;
        let r = &rest[1..];
        let (es, d) = match r.as_bytes().first() {
            Some(b'+' | b'-') => (r[..1].to_string(), r[1..].to_string()),
            _ => (String::new(), r.to_string()),
        };
        exp = Some((e, es, d));
    }
    if sign.is_empty() && src.chance(30) {
        sign = "+".to_string();
    }
    if src.chance(25) {
        let n = src.range(1, 3);
        int = "0".repeat(n) + &int;
    }
    match &mut frac {
        None if exp.is_none() && src.chance(30) => frac = Some(String::new()),
        Some(f) if !f.is_empty() && src.chance(20) => f.push_str("000"),
        _ => {}
    }
    match &mut exp {
        Some((e, es, d)) => {
            if src.chance(50) {
                *e = if *e == 'e' { 'E' } else { 'e' };
            }
            if es.is_empty() && src.chance(30) {
                *es = "+".to_string();
            }
            if src.chance(30) {
                d.insert(0, '0');
            }
        }
        None if frac.as_deref() != Some("") && src.chance(15) => {
            exp = Some((
                *src.pick(&['e', 'E']),
                src.pick(&["", "+", "-"]).to_string(),
                "0".to_string(),
            ));
        }
        None => {}
    }
    let mut out = sign + &int;
    if let Some(f) = frac {
        out.push('.');
        out += &f;
    }
    if let Some((e, es, d)) = exp {
        out.push(e);
        out += &es;
        out += &d;
    }
    out
}

/// A number token valid for the element type (`valid` says whether it parses to a finite
/// value of that type).
pub fn gen_value(src: &mut Src, valid: &dyn Fn(&str) -> bool) -> String {
    for _ in 0..4 {
        let base = base_token(src);
        let tok = decorate(src, base);
        assert!(
            is_number(tok.as_bytes()),
            "generator bug: '{tok}' is not a number"
        );
        if valid(&tok) {
            return tok;
        }
    }
    "0".to_string()
}

/// A small integer value as CTF writes it: mostly plain digits, sometimes spelled otherwise.
fn small_value(src: &mut Src) -> String {
    let v = if src.chance(50) { 1 } else { src.below(256) };
    match src.below(8) {
        0 => format!("{v}.0"),
        1 => format!("00{v}"),
        2 => format!("+{v}"),
        _ => v.to_string(),
    }
}

/// A value for `spec`: a small integer as often as it asks, else any value.
fn spec_value(src: &mut Src, spec: &InputSpec, valid: &dyn Fn(&str) -> bool) -> String {
    if spec.small_values > 0 && src.chance(spec.small_values) {
        small_value(src)
    } else {
        gen_value(src, valid)
    }
}

fn gen_values(src: &mut Src, spec: &InputSpec, valid: &dyn Fn(&str) -> bool) -> Values {
    if spec.sparse {
        // Mostly a few entries; sometimes a run long enough for the parser's block-at-a-time
        // loop over entries (64-byte windows, 32 entries a block).
        let n = if src.chance(15) {
            src.below(80)
        } else {
            src.below(6)
        };
        let mut indices: Vec<usize> = (0..n).map(|_| src.below(spec.dim)).collect();
        if spec.sorted {
            indices.sort_unstable();
        }
        Values::Sparse(
            indices
                .into_iter()
                .map(|idx| {
                    let text = if src.chance(10) {
                        // One or two leading zeros, or so many that the index has more
                        // digits than a u64 reading takes at once (20 or more).
                        let zeros = match src.range(1, 3) {
                            3 => 20,
                            zeros => zeros,
                        };
                        format!("{}{idx}", "0".repeat(zeros))
                    } else {
                        idx.to_string()
                    };
                    (text, idx as u32, spec_value(src, spec, valid))
                })
                .collect(),
        )
    } else {
        let n = if src.chance(6) {
            src.below(spec.dim)
        } else {
            spec.dim
        };
        Values::Dense(
            (0..n)
                .map(|_| {
                    if spec.zeros > 0 && src.chance(spec.zeros) {
                        "0".to_string()
                    } else {
                        spec_value(src, spec, valid)
                    }
                })
                .collect(),
        )
    }
}

fn gen_id(src: &mut Src) -> u64 {
    match src.below(8) {
        0..=3 => src.below(1000) as u64,
        4 => src.u64(),
        5 => u64::MAX - src.below(3) as u64,
        6 => 10u64.pow(src.below(20) as u32),
        _ => src.below(1_000_000) as u64,
    }
}

/// 1-4 random inputs with distinct names and distinct aliases.
pub fn gen_inputs(src: &mut Src) -> Vec<InputSpec> {
    let n_inputs = src.range(1, 4);
    let mut names = Vec::new();
    let mut aliases: Vec<String> = Vec::new();
    let mut inputs = Vec::new();
    for _ in 0..n_inputs {
        let name = unique_name(src, &names);
        names.push(name.clone());
        let alias = if src.chance(35) || aliases.contains(&name) {
            unique_name(src, &aliases)
        } else {
            name.clone()
        };
        aliases.push(alias.clone());
        let sparse = src.chance(40);
        let dim = if sparse && src.chance(30) {
            // Indices around and past two bytes' worth.
            src.range(60_000, 200_000)
        } else if !sparse && src.chance(15) {
            // Samples long enough for the parser's dense runs over 64-byte windows.
            src.range(20, 120)
        } else if src.chance(50) {
            src.range(1, 4)
        } else {
            src.range(1, 20)
        };
        let sorted = sparse && src.chance(50);
        let small_values = match src.below(3) {
            0 => 99,
            1 => 90,
            _ => 0,
        };
        let zeros = if !sparse && src.chance(30) { 80 } else { 0 };
        inputs.push(InputSpec {
            name,
            alias,
            sparse,
            dim,
            small_values,
            zeros,
            sorted,
        });
    }
    inputs
}

/// A random valid dataset of the given inputs; `valid` restricts value tokens to the element
/// type.
pub fn gen_dataset_for(
    src: &mut Src,
    inputs: Vec<InputSpec>,
    valid: &dyn Fn(&str) -> bool,
) -> Dataset {
    let mode = match src.below(4) {
        0 | 1 => Mode::Ids,
        2 => Mode::Lines,
        _ => Mode::SkipIds,
    };
    let n_inputs = inputs.len();
    let n_seqs = src.range(1, 30);
    let mut ids: Vec<u64> = Vec::new();
    let mut seqs = Vec::new();
    for _ in 0..n_seqs {
        let mut id = gen_id(src);
        while ids.contains(&id) {
            id = id.wrapping_add(1);
        }
        ids.push(id);
        let n_lines = if mode == Mode::Ids {
            src.range(1, 5)
        } else {
            1
        };
        let anchor = src.below(n_inputs);
        let mut present: Vec<Vec<bool>> = (0..n_lines)
            .map(|_| {
                (0..n_inputs)
                    .map(|i| i == anchor || n_lines == 1 || src.chance(50))
                    .collect()
            })
            .collect();
        for i in 0..n_inputs {
            if !present.iter().any(|l| l[i]) {
                let l = src.below(n_lines);
                present[l][i] = true;
            }
        }
        let lines = present
            .iter()
            .map(|p| {
                (0..n_inputs)
                    .filter(|&i| p[i])
                    .map(|i| (i, gen_values(src, &inputs[i], valid)))
                    .collect()
            })
            .collect();
        seqs.push(Seq { id, lines });
    }
    Dataset { inputs, mode, seqs }
}

/// What a rendered dataset must parse to.
#[derive(Clone, Debug)]
pub struct ExpSeq {
    /// Key: id, or `key_base` + 0-based physical line.
    pub key: u64,
    /// 1-based line of the first line.
    pub line: u64,
    /// Its lines.
    pub counted_lines: u32,
    /// Per input, the samples in line order.
    pub samples: Vec<Vec<Values>>,
}

/// A dataset rendered to CTF text, with what it must parse to.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// The file.
    pub text: Vec<u8>,
    /// Parser options the text is meant for.
    pub options: StreamOptions,
    /// Expected sequences.
    pub expected: Vec<ExpSeq>,
    /// Lines of the dense samples that are zero-padded (one entry per sample).
    pub padded_lines: Vec<u64>,
    /// Number of physical lines.
    pub lines: u64,
    /// Lines that belong to no sequence.
    pub skipped: u64,
}

fn ws(src: &mut Src, min: usize, max: usize) -> Vec<u8> {
    let n = src.range(min, max);
    (0..n)
        .map(|_| *src.pick(b"   \t  \t\r".as_slice()))
        .collect()
}

fn garbage_token(src: &mut Src) -> Vec<u8> {
    if src.chance(50) {
        return src
            .pick(&[
                "x", "1", "1:2", "abc", "#", ":", "1e", "-", "..", "nan", "inf", "0x10", "1,5",
                ".5",
            ])
            .as_bytes()
            .to_vec();
    }
    let n = src.range(1, 5);
    (0..n).map(|_| name_byte(src)).collect()
}

fn comment(src: &mut Src) -> Vec<u8> {
    let mut out = b"|#".to_vec();
    let n = src.below(7);
    for _ in 0..n {
        let piece: Vec<u8> = match src.below(12) {
            0 => vec![name_byte(src)],
            1 => b" ".to_vec(),
            2 => b"\t".to_vec(),
            3 => "é".as_bytes().to_vec(),
            4 => "日本語".as_bytes().to_vec(),
            5 => src
                .pick(&[b"\x01", b"\x7f", b"\x00", b"\xff", b"\x80", b"\x1b"])
                .to_vec(),
            6 => b"|#".to_vec(),
            7 => b"|##".to_vec(),
            8 => b"\r".to_vec(),
            9 => b"1:2 |#a 3".to_vec(),
            10 => b"#".to_vec(),
            _ => garbage_token(src),
        };
        // A bare '|' would end the comment: pieces hold '|' only in "|#" escapes.
        out.extend(piece);
    }
    out
}

fn unconfigured(src: &mut Src, inputs: &[InputSpec]) -> Vec<u8> {
    let aliases: Vec<&str> = inputs.iter().map(|i| i.alias.as_str()).collect();
    let renamed: Vec<&InputSpec> = inputs
        .iter()
        .filter(|i| !aliases.contains(&i.name.as_str()))
        .collect();
    let name = if !renamed.is_empty() && src.chance(30) {
        src.pick(&renamed).name.clone()
    } else {
        let mut n = gen_name(src);
        while aliases.contains(&n.as_str()) {
            n.push('z');
        }
        n
    };
    let mut out = format!("|{name}").into_bytes();
    for _ in 0..src.below(4) {
        out.extend(ws(src, 1, 2));
        out.extend(garbage_token(src));
    }
    out
}

fn render_sample(src: &mut Src, spec: &InputSpec, values: &Values) -> Vec<u8> {
    let mut out = format!("|{}", spec.alias).into_bytes();
    match values {
        Values::Dense(tokens) => {
            for (k, t) in tokens.iter().enumerate() {
                if k > 0 && (t.starts_with('-') || t.starts_with('+')) && src.chance(25) {
                    // `1-2` is two values
                } else if spec.zeros > 0 && src.chance(90) {
                    out.push(b' ');
                } else {
                    out.extend(ws(src, 1, 3));
                }
                out.extend(t.as_bytes());
            }
        }
        Values::Sparse(entries) => {
            for (text, _, v) in entries {
                out.extend(ws(src, 1, 3));
                out.extend(format!("{text}:{v}").into_bytes());
            }
        }
    }
    out
}

/// Renders an id with optional leading zeros.
fn id_text(src: &mut Src, id: u64) -> Vec<u8> {
    let zeros = if src.chance(15) { src.range(1, 3) } else { 0 };
    format!("{}{id}", "0".repeat(zeros)).into_bytes()
}

/// A random digit run for modes where ids are ignored (may exceed 64 bits).
fn ignored_id(src: &mut Src) -> Vec<u8> {
    if src.chance(10) {
        b"123456789012345678901234567890".to_vec()
    } else {
        let id = gen_id(src);
        id_text(src, id)
    }
}

struct Writer<'a, 'b> {
    src: &'a mut Src<'b>,
    text: Vec<u8>,
    line_no: u64,
    nonblank_seen: bool,
    mode: Mode,
    last_line_empty: bool,
}

impl Writer<'_, '_> {
    fn end_line(&mut self, line: Vec<u8>) {
        if line.iter().any(|&b| !is_ws(b)) {
            self.nonblank_seen = true;
        }
        let crlf = self.src.chance(25);
        self.last_line_empty = line.is_empty() && !crlf;
        self.text.extend(line);
        let nl: &[u8] = if crlf { b"\r\n" } else { b"\n" };
        self.text.extend(nl);
        self.line_no += 1;
    }

    /// A line that belongs to no sequence.
    fn filler(&mut self, inputs: &[InputSpec]) {
        let src = &mut *self.src;
        let blank_only = self.mode == Mode::Ids && !self.nonblank_seen;
        let kind = src.below(if blank_only { 2 } else { 5 });
        let mut line = Vec::new();
        let may_id = self.mode != Mode::Ids && (self.nonblank_seen || self.mode == Mode::SkipIds);
        if may_id && src.chance(25) {
            if !self.nonblank_seen && src.chance(50) {
                // Whitespace before the file's first content, which CNTK skips, and so the
                // ignored id after it (CNTK-BEHAVIOUR §4.1).
                line.extend(ws(src, 1, 2));
            }
            line.extend(ignored_id(src));
            line.extend(ws(src, 0, 2));
        }
        match kind {
            0 => {}
            1 => line.extend(ws(src, 1, 3)),
            2 => {
                line.extend(ws(src, 0, 2));
                line.extend(comment(src));
            }
            3 => {
                line.extend(ws(src, 0, 2));
                line.extend(unconfigured(src, inputs));
                line.extend(ws(src, 0, 2));
            }
            _ => {
                line.extend(ws(src, 0, 2));
                line.extend(unconfigured(src, inputs));
                line.extend(ws(src, 0, 2));
                line.extend(comment(src));
            }
        }
        self.end_line(line);
    }

    fn fillers(&mut self, inputs: &[InputSpec]) {
        if self.src.chance(20) {
            for _ in 0..self.src.range(1, 3) {
                self.filler(inputs);
            }
        }
    }
}

/// Renders `ds` as CTF text with random valid variations; line-mode keys start at
/// `key_base`.
pub fn render(src: &mut Src, ds: &Dataset, key_base: u64) -> Rendered {
    let mut w = Writer {
        src,
        text: Vec::new(),
        line_no: 1,
        nonblank_seen: false,
        mode: ds.mode,
        last_line_empty: false,
    };
    let bom = w.src.chance(15);
    if bom {
        w.text.extend(b"\xEF\xBB\xBF");
    }
    let mut expected = Vec::new();
    let mut padded_lines = Vec::new();
    let mut data_lines = 0u64;
    w.fillers(&ds.inputs);
    for seq in &ds.seqs {
        let mut exp = ExpSeq {
            key: if ds.mode == Mode::Ids {
                seq.id
            } else {
                key_base + w.line_no - 1
            },
            line: w.line_no,
            counted_lines: seq.lines.len() as u32,
            samples: vec![Vec::new(); ds.inputs.len()],
        };
        for (j, samples) in seq.lines.iter().enumerate() {
            if j > 0 {
                w.fillers(&ds.inputs);
            }
            let src = &mut *w.src;
            let mut line = Vec::new();
            if !w.nonblank_seen && ds.mode != Mode::Lines && src.chance(30) {
                // Whitespace before the file's first content, which CNTK skips: the first
                // id, kept or ignored, may follow it (CNTK-BEHAVIOUR §4.1).
                line.extend(ws(src, 1, 2));
            }
            match ds.mode {
                Mode::Ids => {
                    if j == 0 || src.chance(50) {
                        line.extend(id_text(src, seq.id));
                        line.extend(ws(src, 0, 2));
                    } else {
                        line.extend(ws(src, 0, 2));
                    }
                }
                Mode::Lines | Mode::SkipIds => {
                    let may_id = ds.mode == Mode::SkipIds || w.nonblank_seen;
                    if may_id && src.chance(40) {
                        line.extend(ignored_id(src));
                        line.extend(ws(src, 0, 2));
                    } else {
                        line.extend(ws(src, 0, 2));
                    }
                }
            }
            let mut items: Vec<Vec<u8>> = samples
                .iter()
                .map(|(i, v)| render_sample(src, &ds.inputs[*i], v))
                .collect();
            if src.chance(20) {
                items.push(comment(src));
            }
            if src.chance(20) {
                items.push(unconfigured(src, &ds.inputs));
            }
            src.shuffle(&mut items);
            for (k, item) in items.into_iter().enumerate() {
                if k > 0 {
                    line.extend(ws(src, 0, 2));
                }
                line.extend(item);
            }
            line.extend(ws(src, 0, 2));
            for (i, v) in samples {
                if let Values::Dense(t) = v {
                    if t.len() < ds.inputs[*i].dim {
                        padded_lines.push(w.line_no);
                    }
                }
                exp.samples[*i].push(v.clone());
            }
            data_lines += 1;
            w.end_line(line);
        }
        expected.push(exp);
        w.fillers(&ds.inputs);
    }
    let mut lines = w.line_no - 1;
    if !w.src.chance(75) {
        // No final line feed: the last line ends at the end of the file.
        w.text.pop();
        if w.last_line_empty {
            lines -= 1;
        }
    }
    Rendered {
        text: w.text,
        options: StreamOptions {
            skip_sequence_ids: ds.mode == Mode::SkipIds,
            frame_mode: false,
        },
        expected,
        padded_lines,
        lines,
        skipped: lines - data_lines,
    }
}
