//! o2o-agents: networks, algorithms and the agent contract.

pub mod agent;

pub use agent::{Agent, AgentError, Metrics};
