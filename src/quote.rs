//! Data bytes and file names quoted in a message, rendered so that the message stays one line
//! of text that is safe to print on a terminal: the parser quotes malformed tokens and ids
//! with [`quote`], and every `FILE:LINE:COL: ...` diagnostic and error that names a file
//! shows it through [`file_name`].
//!
//! Printable ASCII and valid UTF-8 characters that are not control characters are kept as
//! they are (`é`, `日本`). Control characters are escaped: NUL, tab, carriage return and line
//! feed as `\0`, `\t`, `\r` and `\n`, the other C0 controls and DEL as `\xNN`, the C1 controls
//! (U+0080 to U+009F) as `\u{NN}`; so are, as `\u{NNNN}`, the line and paragraph separators
//! and the bidirectional format characters, which could break the line or reorder it. A
//! byte that is not part of valid UTF-8 is written `\xNN`, so that the message shows the byte
//! itself rather than U+FFFD. A backslash is doubled, so that `\x1B` in a message is always
//! the escape byte and never the four characters of the data. Hex digits are upper case, as
//! in the messages' `byte 0xC3`.

use std::borrow::Cow;
use std::fmt::Write;

/// The most bytes of data that a message quotes (a token, an id).
pub(crate) const QUOTED_BYTES: usize = 40;

/// Renders at most `limit` bytes of `bytes` for a message (see the module documentation).
/// A character that would cross the limit is left out whole: pass at least 3 bytes beyond
/// the limit when the data has them, so that a character at the limit is read as one.
pub(crate) fn quote(bytes: &[u8], limit: usize) -> String {
    let mut text = String::with_capacity(bytes.len().min(limit));
    let mut taken = 0usize;
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            taken += c.len_utf8();
            if taken > limit {
                return text;
            }
            push_char(&mut text, c);
        }
        for &b in chunk.invalid() {
            taken += 1;
            if taken > limit {
                return text;
            }
            push_hex_byte(&mut text, b);
        }
    }
    text
}

/// A file name for a message: as written when none of its characters is a control
/// character, a line or paragraph separator or a bidirectional format character, else
/// rendered whole as [`quote`] renders data (its backslashes doubled too). A name that a
/// glob matched may hold a line feed; shown as it is, it would split its diagnostic in two
/// lines and break the `FILE:LINE:COL: error: MESSAGE` form that scripts read (SPEC §7.5).
pub(crate) fn file_name(name: &str) -> Cow<'_, str> {
    if name
        .chars()
        .any(|c| c.is_control() || breaks_or_reorders(c))
    {
        Cow::Owned(quote(name.as_bytes(), usize::MAX))
    } else {
        Cow::Borrowed(name)
    }
}

/// Appends `c`, escaped if it is a control character or a backslash.
fn push_char(text: &mut String, c: char) {
    match c {
        '\0' => text.push_str("\\0"),
        '\t' => text.push_str("\\t"),
        '\r' => text.push_str("\\r"),
        '\n' => text.push_str("\\n"),
        '\\' => text.push_str("\\\\"),
        c if c.is_ascii_control() => push_hex_byte(text, c as u8),
        // The C1 controls, U+0080 to U+009F, and the characters that break a line or
        // reorder the text around them.
        c if c.is_control() || breaks_or_reorders(c) => {
            let _ = write!(text, "\\u{{{:X}}}", u32::from(c));
        }
        c => text.push(c),
    }
}

/// Whether `c` is a line or paragraph separator (U+2028, U+2029) or a bidirectional format
/// character (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069), which a
/// terminal or viewer may show as a line break or use to reorder the message around it.
fn breaks_or_reorders(c: char) -> bool {
    matches!(
        c,
        '\u{61C}' | '\u{200E}' | '\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// Appends `\xNN` for the byte `b`.
fn push_hex_byte(text: &mut String, b: u8) {
    let _ = write!(text, "\\x{b:02X}");
}

#[cfg(test)]
mod tests {
    use super::{file_name, quote};

    fn all(bytes: &[u8]) -> String {
        quote(bytes, usize::MAX)
    }

    #[test]
    fn plain_ascii_is_unchanged() {
        let printable: Vec<u8> = (0x20..0x7f).filter(|&b| b != b'\\').collect();
        assert_eq!(all(&printable), String::from_utf8(printable).unwrap());
        assert_eq!(all(b"2.0f"), "2.0f");
        assert_eq!(all(b"'1,5'"), "'1,5'");
        assert_eq!(all(b""), "");
    }

    #[test]
    fn letters_beyond_ascii_are_kept() {
        assert_eq!(all("é".as_bytes()), "é");
        assert_eq!(all("1日本語".as_bytes()), "1日本語");
        assert_eq!(
            all("\u{a0}\u{ff}\u{1f600}".as_bytes()),
            "\u{a0}\u{ff}\u{1f600}"
        );
    }

    #[test]
    fn c0_controls_and_del_are_escaped() {
        assert_eq!(all(b"1\x002"), "1\\02");
        assert_eq!(all(b"\t\r\n"), "\\t\\r\\n");
        assert_eq!(all(b"\x1b[31mred\x1b[0m"), "\\x1B[31mred\\x1B[0m");
        assert_eq!(
            all(b"\x01\x07\x08\x0b\x0c\x1f"),
            "\\x01\\x07\\x08\\x0B\\x0C\\x1F"
        );
        assert_eq!(all(b"5\x7f"), "5\\x7F");
    }

    #[test]
    fn c1_controls_are_escaped() {
        assert_eq!(all("\u{80}".as_bytes()), "\\u{80}");
        assert_eq!(all("1\u{9b}31m".as_bytes()), "1\\u{9B}31m");
        assert_eq!(all("\u{9f}\u{a0}".as_bytes()), "\\u{9F}\u{a0}");
    }

    #[test]
    fn line_separators_and_bidirectional_controls_are_escaped() {
        assert_eq!(all("1\u{2028}2\u{2029}".as_bytes()), "1\\u{2028}2\\u{2029}");
        // A right-to-left override and its pop, isolates, marks.
        assert_eq!(
            all("\u{202E}1\u{202C}\u{2066}\u{2069}\u{200F}\u{61C}".as_bytes()),
            "\\u{202E}1\\u{202C}\\u{2066}\\u{2069}\\u{200F}\\u{61C}"
        );
        // Their neighbours are kept.
        assert_eq!(
            all("\u{2027}\u{202F}\u{2065}\u{206A}".as_bytes()),
            "\u{2027}\u{202F}\u{2065}\u{206A}"
        );
    }

    #[test]
    fn invalid_utf8_shows_its_bytes() {
        assert_eq!(all(b"1\xff2"), "1\\xFF2");
        // A lone continuation byte, a lone C1 byte, a lead byte without its continuation.
        assert_eq!(all(b"\x80\x9b\xc3"), "\\x80\\x9B\\xC3");
        // A surrogate encoded in three bytes is not UTF-8.
        assert_eq!(all(b"\xed\xa0\x80"), "\\xED\\xA0\\x80");
        // An overlong NUL.
        assert_eq!(all(b"\xc0\x80"), "\\xC0\\x80");
    }

    #[test]
    fn a_backslash_is_doubled() {
        assert_eq!(all(b"1\\x00"), "1\\\\x00");
        assert_ne!(all(b"\\x00"), all(b"\x00"));
        assert_ne!(all(b"\\0"), all(b"\x00"));
    }

    #[test]
    fn the_limit_counts_bytes_of_the_data() {
        assert_eq!(quote(b"123456", 4), "1234");
        assert_eq!(quote(b"1234", 4), "1234");
        assert_eq!(quote(b"\x00\x00\x00", 2), "\\0\\0");
        assert_eq!(quote(b"1\xff\xfe", 2), "1\\xFF");
        assert_eq!(quote(b"abc", 0), "");
    }

    #[test]
    fn a_character_cut_by_the_limit_is_left_out_whole() {
        // `é` is 2 bytes and `日` 3: a limit inside either leaves it out, never as `\xNN`.
        let text = "1é日x".as_bytes();
        assert_eq!(quote(text, 1), "1");
        assert_eq!(quote(text, 2), "1");
        assert_eq!(quote(text, 3), "1é");
        assert_eq!(quote(text, 4), "1é");
        assert_eq!(quote(text, 5), "1é");
        assert_eq!(quote(text, 6), "1é日");
        assert_eq!(quote(text, 7), "1é日x");
        // A C1 control cut in the middle is left out too.
        assert_eq!(quote("1\u{85}".as_bytes(), 2), "1");
        // Data that really ends in an incomplete character shows its bytes.
        assert_eq!(quote(b"1\xe6\x97", 40), "1\\xE6\\x97");
    }

    #[test]
    fn the_result_is_one_line_without_control_characters() {
        let bytes: Vec<u8> = (0..=255u8).collect();
        let text = all(&bytes);
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert!(!text.contains('\u{fffd}'), "{text:?}");
        // U+0000 to U+00FF as UTF-8: C0, DEL and C1 among them.
        let latin1: String = (0..=255u8).map(char::from).collect();
        let text = all(latin1.as_bytes());
        assert!(!text.chars().any(char::is_control), "{text:?}");
    }

    #[test]
    fn a_file_name_is_shown_as_written_unless_it_would_break_the_line() {
        for plain in [
            "data/train.ctf",
            "d#1.ctf",
            "C:\\data\\x.ctf",
            "日本/é.ctf",
            "",
        ] {
            assert_eq!(file_name(plain), plain);
        }
        assert_eq!(file_name("d\nx.ctf"), "d\\nx.ctf");
        assert_eq!(file_name("a\\b\tc.ctf"), "a\\\\b\\tc.ctf");
        assert_eq!(file_name("x\u{202E}ftc.exe"), "x\\u{202E}ftc.exe");
        assert_eq!(file_name("\u{85}"), "\\u{85}");
    }
}
