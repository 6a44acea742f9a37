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
    /// pushed reference with its digest last. Exit 0 when pushed, 1 when packing or pushing
    /// fails, 2 on a usage error.
    Push {
        /// Reach the registry over plain HTTP.
        #[arg(long)]
        insecure: bool,
        /// Skill directories to pack.
        #[arg(value_name = "DIR", required = true, value_parser = skill_dir)]
        dirs: Vec<PathBuf>,
        /// The image to push: REGISTRY/REPOSITORY:TAG.
        #[arg(value_name = "REFERENCE", value_parser = image_reference)]
        reference: String,
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
        SkillCommand::Push {
            insecure,
            dirs,
            reference,
        } => push(&dirs, &reference, insecure),
    }
}

/// A `skill push` directory: one that exists, so a typo is a usage error like any other.
fn skill_dir(text: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(text);
    if path.is_dir() {
        Ok(path)
    } else {
        Err("not a directory".to_string())
    }
}

/// A `skill push` reference, checked before anything is packed.
fn image_reference(text: &str) -> Result<String, String> {
    agentic_oci::image_registry(text)
        .map(|_| text.to_string())
        .map_err(|e| e.to_string())
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
            return ExitCode::FAILURE;
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
            // Speaking HTTPS to a plain-HTTP registry fails as a broken connection.
            if !insecure && matches!(e, agentic_oci::OciError::RegistryUnavailable { .. }) {
                eprintln!("hint: if the registry serves plain HTTP, pass --insecure");
            }
            ExitCode::FAILURE
        }
    }
}
