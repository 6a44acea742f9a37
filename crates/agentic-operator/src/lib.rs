//! The agentic-operator controllers and command line.

pub mod cli;
