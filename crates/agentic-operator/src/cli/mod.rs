//! The command line: `crd`, `skill validate`, `skill push` and `run`.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Kubernetes operator for AI coding agents and their skills (konveyor.io/v1alpha1).
#[derive(Debug, Parser)]
#[command(name = "agentic-operator", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print every CustomResourceDefinition as multi-document YAML.
    Crd,
}

/// Runs a parsed command line and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Crd => print_crds(),
    }
}

fn print_crds() -> ExitCode {
    match agentic_api::crds_yaml() {
        Ok(yaml) => match std::io::stdout().write_all(yaml.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: writing CRDs: {e}");
                ExitCode::from(2)
            }
        },
        Err(e) => {
            eprintln!("error: serializing CRDs: {e}");
            ExitCode::from(2)
        }
    }
}
