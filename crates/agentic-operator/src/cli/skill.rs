//! `skill validate` and `skill push`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};

#[derive(Debug, Subcommand)]
pub enum SkillCommand {
    /// Validate skills against the Agent Skills specification. Exit 0 when all are valid, 1 when
    /// any is invalid, 2 on a usage or I/O error.
    Validate {
        /// Output format.
        #[arg(long, value_enum, default_value = "text")]
        output: Output,
        /// Skill directories or SKILL.md files.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// Pack skill directories into an OCI image and push it. One directory goes at the image
    /// root; several each go into a top-level directory named after the skill. Prints the
    /// pushed reference with its digest last.
    Push {
        /// Reach the registry over plain HTTP.
        #[arg(long)]
        insecure: bool,
        /// Skill directories, then the image reference (REGISTRY/REPOSITORY:TAG).
        #[arg(required = true, num_args = 2..)]
        args: Vec<String>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

pub fn run(command: SkillCommand) -> ExitCode {
    match command {
        SkillCommand::Validate { output, paths } => validate(output, &paths),
        SkillCommand::Push { insecure, mut args } => {
            let Some(reference) = args.pop() else {
                eprintln!("error: give skill directories and an image reference");
                return ExitCode::from(2);
            };
            let dirs: Vec<PathBuf> = args.into_iter().map(PathBuf::from).collect();
            push(&dirs, &reference, insecure)
        }
    }
}

fn validate(output: Output, paths: &[PathBuf]) -> ExitCode {
    let mut reports = Vec::new();
    for path in paths {
        match agentic_skill::validate_path(path) {
            Ok(report) => reports.push(agentic_skill::PathReport::new(path, report)),
            Err(e) => {
                eprintln!("error: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        }
    }
    match output {
        Output::Text => print!("{}", agentic_skill::render_text(&reports)),
        Output::Json => match serde_json::to_string_pretty(&reports) {
            Ok(json) => println!("{json}"),
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
    }
    if reports.iter().all(|r| r.valid) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn push(dirs: &[PathBuf], reference: &str, insecure: bool) -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async {
        let image = agentic_oci::pack_skills(dirs)?;
        let registry = agentic_oci::image_registry(reference)?;
        let auth = agentic_oci::RegistryAuth::from_default_docker_config(&registry)?;
        let options = agentic_oci::RegistryOptions {
            insecure_registries: if insecure { vec![registry] } else { Vec::new() },
            ..agentic_oci::RegistryOptions::default()
        };
        agentic_oci::push_image(&image, reference, &auth, &options).await
    });
    match result {
        Ok(pushed) => {
            println!("{pushed}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
