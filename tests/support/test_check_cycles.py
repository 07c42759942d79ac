#!/usr/bin/env python3
"""Tests of tests/support/check-cycles.py on small crates written to a temporary folder.

Run: python3 tests/support/test_check_cycles.py   (or python3 -m unittest from scripts/)
"""

import importlib.util
import io
import os
import tempfile
import textwrap
import unittest
from contextlib import redirect_stdout

_spec = importlib.util.spec_from_file_location(
    "check_cycles", os.path.join(os.path.dirname(os.path.abspath(__file__)), "check-cycles.py")
)
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)


class FakeCrates(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def crate(self, files, name="c"):
        """Writes `files` ({path under src: text}) as crate `name`; returns its folder."""
        root = os.path.join(self.dir.name, name)
        for path, text in files.items():
            full = os.path.join(root, "src", path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(textwrap.dedent(text))
        return root

    def cycles(self, files):
        """The cycles as sets of file names relative to src/."""
        root = self.crate(files)
        src = os.path.join(root, "src") + os.sep
        return [
            ({f[len(src) :] for f in comp}, [(a[len(src) :], b[len(src) :], line) for a, b, line, _ in edges])
            for comp, edges, _cycle in check.cycles(root)
        ]

    def test_two_files_using_each_other_are_a_cycle(self):
        found = self.cycles(
            {
                "lib.rs": "mod a;\nmod b;\n",
                "a.rs": "use crate::b::B;\npub struct A;\n",
                "b.rs": "pub struct B;\n\nfn f() -> crate::a::A { crate::a::A }\n",
            }
        )
        self.assertEqual(len(found), 1)
        files, edges = found[0]
        self.assertEqual(files, {"a.rs", "b.rs"})
        self.assertIn(("a.rs", "b.rs", 1), edges)
        self.assertIn(("b.rs", "a.rs", 3), edges)

    def test_a_longer_cycle_and_the_failing_exit(self):
        root = self.crate(
            {
                "lib.rs": "pub mod x;\npub mod y;\npub mod z;\n",
                "x.rs": "use crate::y;\npub fn fx() { y::fy() }\n",
                "y.rs": "pub fn fy() { crate::z::fz() }\n",
                "z.rs": "pub fn fz() { super::x::fx() }\n",
            }
        )
        out = io.StringIO()
        with redirect_stdout(out):
            status = check.main(["check-cycles.py", root])
        self.assertEqual(status, 1)
        self.assertIn("x.rs -> ", out.getvalue())
        self.assertIn("x.rs:1: use crate::y", out.getvalue())
        self.assertIn("z.rs:1: super::x::fx", out.getvalue())

    def test_a_child_using_its_parent_is_no_cycle(self):
        found = self.cycles(
            {
                "lib.rs": "pub mod host;\n",
                "host/mod.rs": """
                    mod state;
                    pub use state::State;
                    pub struct Model;
                    pub fn helper() {}
                """,
                "host/state.rs": """
                    use super::{Model, helper};
                    pub struct State(Model);
                    fn go() { super::helper(); helper() }
                """,
            }
        )
        self.assertEqual(found, [])

    def test_a_parent_that_uses_what_it_re_exports_is_a_cycle(self):
        found = self.cycles(
            {
                "lib.rs": "pub mod host;\n",
                "host/mod.rs": """
                    mod state;
                    pub use state::State;
                    pub struct Model;
                    fn make() -> State { State(Model) }
                """,
                "host/state.rs": "use super::Model;\npub struct State(pub Model);\n",
            }
        )
        self.assertEqual([f for f, _ in found], [{"host/mod.rs", "host/state.rs"}])

    def test_an_import_through_a_re_export_leads_to_the_defining_file(self):
        found = self.cycles(
            {
                "lib.rs": "mod train;\nmod data;\n",
                "train/mod.rs": "mod step;\npub use step::Step;\nuse crate::data::Batch;\n",
                "train/step.rs": "pub struct Step;\n",
                "data.rs": "use crate::train::Step;\npub struct Batch;\n",
            }
        )
        # data.rs uses train/step.rs (not train/mod.rs), which uses nothing: no cycle.
        self.assertEqual(found, [])
        found = self.cycles(
            {
                "train/step.rs": "use crate::data::Batch;\npub struct Step;\n",
            }
        )
        self.assertEqual([f for f, _ in found], [{"data.rs", "train/step.rs"}])

    def test_a_re_export_from_another_crate_ends_at_the_re_exporting_file(self):
        found = self.cycles(
            {
                "main.rs": "mod train;\nmod data;\n",
                "train/mod.rs": "pub use other::Forced;\nuse crate::data::shape;\nfn f() { shape::pad() }\n",
                "data/mod.rs": "pub mod shape;\n",
                "data/shape.rs": "use crate::train::Forced;\npub fn pad() {}\n",
            }
        )
        self.assertEqual([f for f, _ in found], [{"data/shape.rs", "train/mod.rs"}])

    def test_glob_re_exports_resolve_to_the_defining_file(self):
        found = self.cycles(
            {
                "lib.rs": "mod ops;\nmod user;\n",
                "ops/mod.rs": "mod rows;\npub use rows::*;\n",
                "ops/rows.rs": "pub fn dot() {}\nfn g() { crate::user::u() }\n",
                "user.rs": "use crate::ops::dot;\npub fn u() { dot() }\n",
            }
        )
        self.assertEqual([f for f, _ in found], [{"ops/rows.rs", "user.rs"}])

    def test_test_code_comments_and_strings_do_not_count(self):
        found = self.cycles(
            {
                "lib.rs": "mod a;\nmod b;\n#[cfg(test)]\nmod fixtures;\n",
                "a.rs": """
                    use crate::b::B;
                    /// See [`crate::b`]; // crate::b::B
                    /* crate::b::B /* nested */ crate::b::B */
                    pub struct A;
                    const S: &str = "crate::b::B";
                    const R: &str = r#"crate::b::B "quoted" "#;
                    const C: char = '"';
                """,
                "b.rs": """
                    pub struct B;
                    const C: char = '"';
                    fn life<'a>(x: &'a str) -> &'a str { x }
                    #[cfg(test)]
                    use crate::a::A;
                    #[cfg(all(test, feature = "x"))]
                    fn helper() -> crate::a::A { crate::a::A }
                    #[cfg(test)]
                    mod tests {
                        use crate::a::A;
                        fn t() { let _ = crate::fixtures::F; }
                    }
                    macro_rules! m { () => { $crate::a::A }; }
                """,
                "fixtures.rs": "pub const F: u8 = 0;\nuse crate::b::B;\n",
            }
        )
        self.assertEqual(found, [])

    def test_a_cfg_not_test_or_any_test_item_counts(self):
        found = self.cycles(
            {
                "lib.rs": "mod a;\nmod b;\n",
                "a.rs": "use crate::b::B;\npub struct A;\n",
                "b.rs": '#[cfg(any(test, feature = "x"))]\nfn f() -> crate::a::A { crate::a::A }\npub struct B;\n',
            }
        )
        self.assertEqual([f for f, _ in found], [{"a.rs", "b.rs"}])

    def test_inline_modules_and_path_attributes(self):
        found = self.cycles(
            {
                "lib.rs": """
                    mod outer {
                        pub mod inner;
                    }
                    #[path = "elsewhere/thing.rs"]
                    mod thing;
                """,
                "outer/inner.rs": "pub fn i() { crate::thing::t() }\n",
                "elsewhere/thing.rs": "pub fn t() {}\nfn u() { crate::outer::inner::i() }\n",
            }
        )
        self.assertEqual([f for f, _ in found], [{"outer/inner.rs", "elsewhere/thing.rs"}])

    def test_a_bin_is_its_own_crate(self):
        root = self.crate(
            {
                "lib.rs": "pub mod a;\n",
                "a.rs": "pub fn a() {}\n",
                "bin/tool.rs": "mod a;\nfn main() { a::a() }\n",
                "bin/a.rs": "pub fn a() { crate::main() }\n",
            }
        )
        found = check.cycles(root)
        self.assertEqual(len(found), 1)
        self.assertEqual({os.path.basename(f) for f in found[0][0]}, {"tool.rs", "a.rs"})
        self.assertTrue(all("bin" in f for f in found[0][0]))

    def test_no_cycle_passes(self):
        root = self.crate({"lib.rs": "mod a;\nuse a::f;\n", "a.rs": "pub fn f() {}\n"})
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(check.main(["check-cycles.py", root]), 0)
        self.assertIn("no import cycles", out.getvalue())


class FolderCycles(FakeCrates):
    """Cycles between modules of one parent where one of them is a folder."""

    def folders(self, files):
        return [(parent, comp) for parent, comp, _inside, _cycle in check.folder_cycles(self.crate(files))]

    def test_two_folders_using_each_other_without_a_file_cycle(self):
        # data/batch.rs uses train/rng.rs and train/run.rs uses data/cache.rs: no two files
        # use each other, yet the folders do.
        files = {
            "lib.rs": "mod data;\nmod train;\n",
            "data/mod.rs": "pub mod batch;\npub mod cache;\n",
            "data/batch.rs": "use crate::train::rng::Rng;\npub fn b(_: Rng) {}\n",
            "data/cache.rs": "pub struct Pairs;\n",
            "train/mod.rs": "pub mod rng;\npub mod run;\n",
            "train/rng.rs": "pub struct Rng;\n",
            "train/run.rs": "use crate::data::cache::Pairs;\npub fn r(_: Pairs) {}\n",
        }
        self.assertEqual(self.cycles(files), [])
        self.assertEqual(self.folders(files), [((), ["data", "train"])])
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(check.main(["check-cycles.py", os.path.join(self.dir.name, "c")]), 1)
        text = out.getvalue()
        self.assertIn("2 modules of crate: data, train", text)
        self.assertIn("data/batch.rs:1: use crate::train::rng::Rng", text)
        self.assertIn("train/run.rs:1: use crate::data::cache::Pairs", text)

    def test_nested_folders_are_checked_below_their_parent(self):
        found = self.folders(
            {
                "lib.rs": "mod train;\n",
                "train/mod.rs": "mod engine;\nmod observe;\n",
                "train/engine/mod.rs": "pub mod step;\n",
                "train/engine/step.rs": "pub fn s() { crate::train::observe::census::c() }\n",
                "train/observe/mod.rs": "pub mod census;\npub mod report;\n",
                "train/observe/census.rs": "pub fn c() {}\n",
                "train/observe/report.rs": "pub fn r() { crate::train::engine::step::s() }\n",
            }
        )
        self.assertEqual(found, [(("train",), ["engine", "observe"])])

    def test_a_parent_and_its_children_and_one_way_folders_are_no_cycle(self):
        found = self.folders(
            {
                "lib.rs": "mod cmd;\nmod recipe;\npub fn root() {}\n",
                "cmd/mod.rs": "pub mod train;\npub fn helper() { train::t() }\n",
                "cmd/train.rs": "pub fn t() { super::helper(); crate::root() }\n",
                "recipe/mod.rs": "pub mod stage;\n",
                "recipe/stage.rs": "pub fn s() { crate::cmd::train::t() }\n",
            }
        )
        self.assertEqual(found, [])

    def test_a_file_and_a_folder_using_each_other(self):
        found = self.folders(
            {
                "lib.rs": "mod error;\nmod data;\n",
                "error.rs": "pub fn e() { crate::data::read::r() }\n",
                "data/mod.rs": "pub mod read;\n",
                "data/read.rs": "pub fn r() { crate::error::e() }\n",
            }
        )
        self.assertEqual(found, [((), ["data", "error"])])


if __name__ == "__main__":
    unittest.main()
