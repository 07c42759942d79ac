//! `transduce table3`: Table 3's parameter counts, computed next to the paper's; with
//! `--results`, the report of a run of it (`table3.md` and its perplexity chart).

use std::path::PathBuf;

use clap::Args;

use crate::table3;
use transduce_train::error::Result;

#[derive(Args, Debug)]
pub struct Table3Cmd {
    /// Our measured figures per row (JSON: `{ "scale", "note", "rows": { "base": { "steps",
    /// "ppl", "bleu", "params" }, … } }`): write the report instead of the counts.
    #[arg(long, requires = "out")]
    pub results: Option<PathBuf>,
    /// The folder `table3.md` and `table3-ppl.svg` go into.
    #[arg(long, requires = "results")]
    pub out: Option<PathBuf>,
}

pub fn run(cmd: Table3Cmd) -> Result<()> {
    match (cmd.results, cmd.out) {
        (Some(results), Some(out)) => {
            let results = table3::Results::read(&results)?;
            table3::write(&results, &out)?;
            let (rho, n) = table3::ppl_correlation(&results);
            eprintln!(
                "wrote {} and {} ({n} rows; Spearman ρ of dev perplexity {})",
                out.join("table3.md").display(),
                out.join("table3-ppl.svg").display(),
                rho.map_or("not defined".into(), |r| format!("{r:.3}"))
            );
        }
        _ => print!("{}", transduce::config::table3_report()),
    }
    Ok(())
}
