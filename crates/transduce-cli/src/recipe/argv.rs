//! A subcommand's arguments read by its own parser: a recipe's stage runs `transduce
//! train`, `prepare`, `export` … as a command line would, so both train alike.

use clap::{Args, Parser};

/// Parses a subcommand's arguments with its own clap definition.
#[derive(Parser)]
#[command(no_binary_name = true)]
pub struct Argv<T: Args> {
    #[command(flatten)]
    pub cmd: T,
}

impl<T: Args> Argv<T> {
    /// The subcommand's options from its arguments, as its own parser reads them.
    pub fn read(args: &[String]) -> transduce_train::error::Result<T> {
        Ok(Argv::<T>::try_parse_from(args)?.cmd)
    }
}
