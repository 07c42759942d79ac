//! Printing.

use super::*;

#[test]
fn printing_round_trips_and_escapes() {
    let mut rng = Rng::new(5);
    for _ in 0..2000 {
        let tree = random_tree(&mut rng, 6);
        let text = print_tree(&tree, false);
        assert_eq!(parse_trees(&text), Ok(vec![tree.clone()]), "{text}");
        let outer = print_tree(&tree, true);
        assert_eq!(parse_trees(&outer), Ok(vec![p("", vec![tree.clone()])]));
    }
    let tree = p("S", vec![w("NN", "dog"), p("VP", vec![w("VBZ", "barks")])]);
    assert_eq!(print_tree(&tree, false), "(S (NN dog) (VP (VBZ barks)))");
    assert_eq!(print_tree(&tree, true), "( (S (NN dog) (VP (VBZ barks))) )");
    // What the format cannot carry is escaped the treebank's way.
    let odd = p("S", vec![w("(", "f(x)"), w("NN", "New York"), w("", "")]);
    assert_eq!(
        print_tree(&odd, false),
        "(S (-LRB- f-LRB-x-RRB-) (NN New_York) (_ _))"
    );
    assert!(parse_trees(&print_tree(&odd, false)).is_ok());
    // Gold tags back into a prediction, for EVALB.
    let pred = tree.with_placeholder_tags();
    assert_eq!(pred.tags(), ["XX", "XX"]);
    assert_eq!(pred.with_tags(&["NN", "VBZ"]), Some(tree.clone()));
    assert_eq!(pred.with_tags(&["NN"]), None);
    assert_eq!(pred.with_tags(&["NN", "VBZ", "X"]), None);
}
