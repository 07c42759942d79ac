//! `transduce table3`: the paper's Table 3 rows.

use crate::harness::*;

#[test]
fn table3_prints_every_row() {
    let out = run(&["table3"]);
    for row in ["base", "A1", "B2", "C7", "D4", "E", "big"] {
        assert!(
            out.lines().any(|l| l.starts_with(row)),
            "{row} missing:\n{out}"
        );
    }
}
