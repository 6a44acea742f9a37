//! The `agentic-operator` binary: wires the command line to the libraries.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = agentic_operator::cli::Cli::parse();
    agentic_operator::cli::run(cli)
}
