use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while starting, using or stopping a test environment.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `AGENTIC_TESTENV_BIN` is not set, so the control-plane binaries can't be found.
    #[error(
        "AGENTIC_TESTENV_BIN is not set: run `make testenv` (or `hack/testenv-tools.sh`) and \
         export AGENTIC_TESTENV_BIN to the directory it prints last; `make test` does this for you"
    )]
    BinDirUnset,

    /// A binary the environment needs is not where it should be.
    #[error("{name} not found at {}: {hint}", path.display())]
    BinaryMissing {
        name: &'static str,
        path: PathBuf,
        hint: &'static str,
    },

    /// A file or directory operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A child process could not be started.
    #[error("starting {name} ({}): {source}", program.display())]
    Spawn {
        name: &'static str,
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A child process exited while the environment was starting.
    #[error("{name} exited during startup ({status}); last lines of {}:\n{log_tail}", log.display())]
    ExitedEarly {
        name: &'static str,
        status: String,
        log: PathBuf,
        log_tail: String,
    },

    /// A component did not become ready in time.
    #[error("{what} was not ready after {timeout:?}; last lines of {}:\n{log_tail}", log.display())]
    NotReady {
        what: String,
        timeout: Duration,
        log: PathBuf,
        log_tail: String,
    },

    /// A command the test node is set up with failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    CommandFailed {
        command: String,
        status: String,
        stderr: String,
    },

    /// No free loopback port could be reserved.
    #[error("finding a free port on 127.0.0.1: {0}")]
    NoFreePort(#[source] std::io::Error),

    /// Generating the throw-away certificates failed.
    #[error("generating {what}: {source}")]
    Certificate {
        what: &'static str,
        #[source]
        source: rcgen::Error,
    },

    /// A CRD manifest shipped with the agent-sandbox controller could not be read as a CRD.
    #[error("parsing CRD manifest {}: {message}", path.display())]
    CrdManifest { path: PathBuf, message: String },

    /// The directory of agent-sandbox CRD manifests holds none.
    #[error("no CRD manifests (*.yaml) in {}: rebuild it with `make testenv`", path.display())]
    NoCrdManifests { path: PathBuf },

    /// Loading the generated kubeconfig or building a client from it failed.
    #[error("kubeconfig {}: {message}", path.display())]
    Kubeconfig { path: PathBuf, message: String },

    /// A request to the API server failed.
    #[error("{action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },

    /// A CRD did not become Established in time.
    #[error("CustomResourceDefinition {name} was not Established after {timeout:?}")]
    CrdNotEstablished { name: String, timeout: Duration },

    /// The API server answered something this crate can't use.
    #[error("unexpected answer from the API server: {0}")]
    UnexpectedResponse(String),

    /// The namespace prefix is not usable as the start of a namespace name.
    #[error(
        "namespace prefix {prefix:?} is invalid: use 1 to {max} lowercase letters, digits or '-', \
         starting with a letter"
    )]
    InvalidNamespacePrefix { prefix: String, max: usize },

    /// The shared environment failed to start earlier in this test binary.
    #[error("the shared test environment failed to start: {0}")]
    SharedStartFailed(String),
}

impl Error {
    /// A stable CamelCase name for the kind of failure, for logs and assertions.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::BinDirUnset => "BinDirUnset",
            Error::BinaryMissing { .. } => "BinaryMissing",
            Error::Io { .. } => "Io",
            Error::Spawn { .. } => "Spawn",
            Error::ExitedEarly { .. } => "ExitedEarly",
            Error::NotReady { .. } => "NotReady",
            Error::CommandFailed { .. } => "CommandFailed",
            Error::NoFreePort(_) => "NoFreePort",
            Error::Certificate { .. } => "Certificate",
            Error::CrdManifest { .. } => "CrdManifest",
            Error::NoCrdManifests { .. } => "NoCrdManifests",
            Error::Kubeconfig { .. } => "Kubeconfig",
            Error::Kube { .. } => "Kube",
            Error::CrdNotEstablished { .. } => "CrdNotEstablished",
            Error::UnexpectedResponse(_) => "UnexpectedResponse",
            Error::InvalidNamespacePrefix { .. } => "InvalidNamespacePrefix",
            Error::SharedStartFailed(_) => "SharedStartFailed",
        }
    }

    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io {
            action,
            path,
            source,
        }
    }

    pub(crate) fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
        let action = action.into();
        move |source| Error::Kube { action, source }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
