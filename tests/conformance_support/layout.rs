//! CNTK's layout of one stream in one minibatch, as its reader tests wrote it into their control
//! files (CNTK-BEHAVIOUR §6.2; conformance README "Control file format"). This is CNTK's
//! output format, not ours (our minibatches are ragged, without gaps): the replay only uses it
//! to render the real `Minibatch` contents the way CNTK's harness printed them.
//!
//! Width T = longest sequence in that stream's actual samples; sequences in minibatch order
//! go into the first row with room (`fill + len <= T`), at offset `fill`; a new row opens when
//! none has room. Columns are time-major (`column = t * rows + row`); gaps are skipped when
//! written.

/// The packed layout of one stream in one minibatch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Parallel rows (P).
    pub rows: usize,
    /// Time steps (T).
    pub width: usize,
    /// For each column `t * rows + row`: the sequence (position in the minibatch) and sample
    /// index it holds, or `None` for a gap.
    pub columns: Vec<Option<(usize, usize)>>,
}

/// First-fit packing of sequences with the given lengths, in order (CNTK-BEHAVIOUR §6.2).
pub fn first_fit(lengths: &[usize]) -> Layout {
    let width = lengths.iter().copied().max().unwrap_or(0);
    let mut fills: Vec<usize> = Vec::new();
    let mut placement = Vec::with_capacity(lengths.len());
    for &len in lengths {
        let row = match fills.iter().position(|&fill| fill + len <= width) {
            Some(row) => row,
            None => {
                fills.push(0);
                fills.len() - 1
            }
        };
        placement.push((row, fills[row]));
        fills[row] += len;
    }
    let rows = fills.len();
    let mut columns = vec![None; rows * width];
    for (seq, (&len, &(row, offset))) in lengths.iter().zip(&placement).enumerate() {
        for k in 0..len {
            columns[(offset + k) * rows + row] = Some((seq, k));
        }
    }
    Layout {
        rows,
        width,
        columns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CNTK-BEHAVIOUR §6.2: lengths 2, 1, 1 give 2 rows; row 1 holds B then C.
    #[test]
    fn first_fit_shares_rows_time_major() {
        let layout = first_fit(&[2, 1, 1]);
        assert_eq!((layout.rows, layout.width), (2, 2));
        assert_eq!(
            layout.columns,
            [Some((0, 0)), Some((1, 0)), Some((0, 1)), Some((2, 0))]
        );
        let gaps = first_fit(&[2, 2, 1]);
        assert_eq!(gaps.rows, 3);
        assert_eq!(gaps.columns[5], None);
    }
}
