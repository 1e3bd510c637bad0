//! A call's arguments checked against the shapes of the recorded schemas (strings, and integers
//! from 0 to 2^53 - 1); anything else is `invalid-arguments` naming the field.

use serde_json::{Map, Value};

use crate::BuiltinError;

pub(crate) struct Args {
    tool: &'static str,
    fields: Map<String, Value>,
}

const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

impl Args {
    pub(crate) fn new(tool: &'static str, value: Value) -> Result<Args, BuiltinError> {
        match value {
            Value::Object(fields) => Ok(Args { tool, fields }),
            other => Err(BuiltinError::InvalidArguments {
                tool,
                reason: format!("expected an object, got {other}"),
            }),
        }
    }

    fn invalid(&self, reason: String) -> BuiltinError {
        BuiltinError::InvalidArguments {
            tool: self.tool,
            reason,
        }
    }

    pub(crate) fn string(&self, key: &str) -> Result<String, BuiltinError> {
        self.optional_string(key)?
            .ok_or_else(|| self.invalid(format!("`{key}` is required")))
    }

    pub(crate) fn optional_string(&self, key: &str) -> Result<Option<String>, BuiltinError> {
        match self.fields.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.invalid(format!("`{key}` must be a string, got {other}"))),
        }
    }

    pub(crate) fn uint(&self, key: &str) -> Result<Option<u64>, BuiltinError> {
        match self.fields.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if v <= MAX_SAFE_INTEGER => Ok(Some(v)),
                _ => Err(self.invalid(format!(
                    "`{key}` must be an integer from 0 to {MAX_SAFE_INTEGER}, got {n}"
                ))),
            },
            Some(other) => Err(self.invalid(format!("`{key}` must be an integer, got {other}"))),
        }
    }
}
