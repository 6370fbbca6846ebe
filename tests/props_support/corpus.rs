//! A corpus of several generated files, some damaged at random, with the valid and invalid
//! sequences the naive reference reads from it: the input of the corpus-level property
//! tests of the parser (`tests/parser_props.rs`) and of the engines (`tests/engine_props.rs`).

use std::collections::HashSet;

use ctf_reader::parser::StreamOptions;
use ctf_reader::InputConfig;

use super::entropy::Src;
use super::model::{gen_dataset_for, gen_inputs, render};
use super::reference::reference_in_corpus;
use super::run::{parse_bits, Flt, SeqSnap};

const INTERESTING: &[u8] = b"|:#0123456789+-.eE \t\r\n\x00\xff\x80\x7f";
const SNIPPETS: &[&[u8]] = &[
    b"|",
    b"|#",
    b":",
    b"1e",
    b"-",
    b"99999999999999999999",
    b"1e99999",
    b"||",
    b" 5 ",
    b"\n7 ",
    b"\xEF\xBB\xBF",
    b"\xFF\xFE",
    b".5",
    b"1.e5",
    b"\r\n",
];

/// Random byte-level damage to a text.
pub fn mutate(src: &mut Src, text: &mut Vec<u8>) {
    for _ in 0..src.range(1, 8) {
        let pos = src.below(text.len() + 1);
        match src.below(8) {
            0 if pos < text.len() => text[pos] = *src.pick(INTERESTING),
            1 => text.insert(pos, *src.pick(INTERESTING)),
            2 if pos < text.len() => {
                text.remove(pos);
            }
            3 => text.insert(pos, b'\n'),
            4 if pos < text.len() => text[pos] = src.byte(),
            5 => {
                let s = *src.pick(SNIPPETS);
                text.splice(pos..pos, s.iter().copied());
            }
            6 => {
                // duplicate the line holding `pos`
                let start = text[..pos]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |p| p + 1);
                let end = text[pos..]
                    .iter()
                    .position(|&b| b == b'\n')
                    .map_or(text.len(), |p| pos + p + 1);
                let line = text[start..end].to_vec();
                text.splice(end..end, line);
            }
            _ => {
                let end = (pos + src.below(10)).min(text.len());
                text.drain(pos..end);
            }
        }
    }
}

/// Generated files read as one corpus, with what the naive reference reads from them.
pub struct Corpus {
    /// The configured inputs.
    pub inputs: Vec<InputConfig>,
    /// The parser options the first file was rendered for (the corpus's).
    pub options: StreamOptions,
    /// The files' bytes, in corpus order.
    pub texts: Vec<Vec<u8>>,
    /// Line-mode key of each file's first line: the physical lines of the files before it.
    pub bases: Vec<u64>,
    /// The valid sequences, in corpus order.
    pub valid: Vec<SeqSnap>,
    /// The invalid sequences: key (`None` when the id does not fit in 64 bits), 1-based first
    /// line in its file, and the valid sequences of the corpus before it.
    pub invalid: Vec<(Option<u64>, u64, usize)>,
}

/// `min_files..=max_files` files of one input set, each damaged by [`mutate`] three times in
/// ten, read by the naive reference with ids unique across the corpus and line-mode keys
/// continuing from file to file; `frame_mode_percent` of the corpora are read in frame mode.
/// `None` when the reference finds a file fatally unreadable or ambiguous (SPEC leaves such
/// a file's sequences open).
pub fn gen_corpus<T: Flt>(
    src: &mut Src,
    min_files: usize,
    max_files: usize,
    frame_mode_percent: u32,
) -> Option<Corpus> {
    let specs = gen_inputs(src);
    let inputs: Vec<InputConfig> = specs.iter().map(|i| i.config()).collect();
    let mut texts = Vec::new();
    let mut options = None;
    for _ in 0..src.range(min_files, max_files) {
        let ds = gen_dataset_for(src, specs.clone(), &|t| parse_bits::<T>(t).is_some());
        let r = render(src, &ds, 0);
        options.get_or_insert(r.options);
        let mut text = r.text;
        if src.chance(30) {
            mutate(src, &mut text);
        }
        texts.push(text);
    }
    let mut options = options.expect("at least one file");
    if frame_mode_percent > 0 && src.chance(frame_mode_percent) {
        options.frame_mode = true;
    }
    let mut seen = HashSet::new();
    let mut key_base = 0;
    let mut valid = Vec::new();
    let mut invalid = Vec::new();
    let mut bases = Vec::new();
    for text in &texts {
        let r = reference_in_corpus::<T>(text, &inputs, options, key_base, &mut seen)?;
        if r.ambiguous {
            return None;
        }
        bases.push(key_base);
        let before = valid.len();
        invalid.extend(
            r.invalid
                .iter()
                .map(|i| (i.key, i.line, i.valid_before + before)),
        );
        valid.extend(r.seqs);
        key_base += r.lines;
    }
    Some(Corpus {
        inputs,
        options,
        texts,
        bases,
        valid,
        invalid,
    })
}
