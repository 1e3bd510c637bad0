//! The `berth` binary against scratch machines: JSON documents, schemas, exit codes.

#[path = "../support/mod.rs"]
mod support;

mod approval;
mod bad_input;
mod check;
mod client;
mod conflicts;
mod containment;
mod corpus;
mod exit_codes;
mod gate;
mod hooks;
mod host;
mod ledger;
mod lifecycle;
mod mcp_https;
mod mcp_oauth;
mod mcp_prepare;
mod mcp_servers;
mod npm;
mod oracle_discovery;
mod oracle_hooks;
mod oracle_input;
mod oracle_mcp;
mod oracle_tools;
mod outputs;
mod plugins;
mod policy;
mod registry_fixture;
mod resolve;
mod restricted;
mod serve;
mod status;
mod store;
mod updates;
mod v2_npm;
mod world;
