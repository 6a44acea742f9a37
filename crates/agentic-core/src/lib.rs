//! agentic-core
