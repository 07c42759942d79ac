//! The stage kinds: one file each, holding the kind's settings, how they are read from the
//! recipe, what the stage leaves for others, how it runs and what it costs. The runner and
//! the plan know the kinds only through [`Spec`] and [`output`]; this file's [`entry`] is
//! the one place that lists them. The file's vocabulary (each kind's name and the fields it
//! takes) is the syntax's (`format.rs`): an unknown field is an error at its line before
//! any stage is read.

mod average;
mod export;
mod fields;
mod prepare;
mod select;
mod spec;
mod table3;
mod teacher;
mod test;
mod train;

use transduce_train::error::Result;

use super::format::Kind;
use super::plan::{Output, Plan};
use super::state::State;

use fields::Fields;
pub use spec::{At, CostAt, RunOptions, Spec};

/// What a kind provides to the runner and the plan.
struct Entry {
    read: fn(&Fields) -> Result<Box<dyn Spec>>,
    output: fn(&Plan, usize) -> Result<Output>,
}

fn boxed<T: Spec + 'static>(spec: Result<T>) -> Result<Box<dyn Spec>> {
    spec.map(|s| Box::new(s) as Box<dyn Spec>)
}

/// The kinds, each by its file.
fn entry(kind: Kind) -> Entry {
    match kind {
        Kind::Prepare => Entry {
            read: |f| boxed(prepare::Prepare::read(f)),
            output: prepare::output,
        },
        Kind::Train => Entry {
            read: |f| boxed(train::Train::read(f)),
            output: train::output,
        },
        Kind::Average => Entry {
            read: |f| boxed(average::Average::read(f)),
            output: average::output,
        },
        Kind::Teacher => Entry {
            read: |f| boxed(teacher::Teacher::read(f)),
            output: teacher::output,
        },
        Kind::Select => Entry {
            read: |f| boxed(select::Select::read(f)),
            output: select::output,
        },
        Kind::Export => Entry {
            read: |f| boxed(export::Export::read(f)),
            output: export::output,
        },
        Kind::Test => Entry {
            read: |f| boxed(test::Test::read(f)),
            output: test::output,
        },
        Kind::Table3 => Entry {
            read: |f| boxed(table3::Table3::read(f)),
            output: table3::output,
        },
    }
}

/// Reads stage `node` of the plan.
pub fn read(plan: &Plan, node: usize) -> Result<Box<dyn Spec>> {
    let fields = Fields::new(plan, node);
    (entry(fields.stage.kind).read)(&fields)
}

/// What stage `node` leaves for the stages after it (the plan's `output_of`).
pub fn output(plan: &Plan, node: usize) -> Result<Output> {
    (entry(plan.stage_of(node).1.kind).output)(plan, node)
}

/// Seconds a stage may take from where it stands, and how that was estimated.
pub fn cost(spec: &dyn Spec, at: &CostAt) -> Option<(f64, &'static str)> {
    if *at.state == State::Done {
        return Some((0.0, "done"));
    }
    spec.cost(at)
}
