//! What a source's contributions may do through Berth: each tool and hook falls in a category
//! (or in none: a plugin's own new tools and its other hooks are what was approved), each
//! category is capped (allow / review / deny), and a `review` is lifted per source and item by
//! the person. A refusal touches only that contribution.
//!
//! Owns: the categories and the judgement of one source's contributions. Must not: register or
//! unregister anything (the catalog does, with this judgement).

use serde::Serialize;

use super::keys::BUILT_IN_TOOLS;
use super::{Effective, Layer};

/// What goes through Berth and is capped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    ToolOverride,
    Config,
    ModelRequest,
    ShellEnv,
    Credentials,
    Ui,
}

impl Category {
    pub fn key(self) -> &'static str {
        match self {
            Category::ToolOverride => "cap.tool-override",
            Category::Config => "cap.config",
            Category::ModelRequest => "cap.model-request",
            Category::ShellEnv => "cap.shell-env",
            Category::Credentials => "cap.credentials",
            Category::Ui => "cap.ui",
        }
    }
}

/// The category of a hook a plugin registers, if it is capped.
pub fn hook_category(name: &str) -> Option<Category> {
    match name {
        "config" => Some(Category::Config),
        "chat.params" | "chat.headers" | "chat.message" => Some(Category::ModelRequest),
        n if n.starts_with("experimental.") => Some(Category::ModelRequest),
        "shell.env" => Some(Category::ShellEnv),
        "auth" => Some(Category::Credentials),
        _ => None,
    }
}

/// One contribution a cap keeps from registering (or one call it refused).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Limited {
    /// `tool:<name>`, `hook:<name>`, or `call:<method>`.
    pub item: String,
    pub category: Category,
    /// `review` (held until the person allows it for this source) or `deny`.
    pub cap: String,
    pub layer: Layer,
}

/// A source's contributions, judged.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Judged {
    pub tools: Vec<String>,
    pub hooks: Vec<String>,
    pub limited: Vec<Limited>,
}

impl Effective {
    /// Whether `item` of `source_id` in `category` may go through now; the limit when not.
    pub fn admits(&self, source_id: &str, item: &str, category: Category) -> Result<(), Limited> {
        let (cap, layer) = match self.entry(category.key()) {
            Some(e) => (e.value.as_str().unwrap_or("deny").to_string(), e.layer),
            None => ("deny".to_string(), Layer::Product),
        };
        let granted = || {
            self.grants
                .contains(&(source_id.to_string(), item.to_string()))
        };
        match cap.as_str() {
            "allow" => Ok(()),
            "review" if granted() => Ok(()),
            _ => Err(Limited {
                item: item.to_string(),
                category,
                cap,
                layer,
            }),
        }
    }

    /// Which of `tools` and `hooks` register for `source_id`, and what is held or refused. A
    /// tool named like one of OpenCode's built-ins is an override; one the organisation
    /// protects is refused whatever the cap.
    pub fn judge(&self, source_id: &str, tools: &[String], hooks: &[String]) -> Judged {
        let protected = self.protected_tools();
        let mut out = Judged::default();
        for t in tools {
            let item = format!("tool:{t}");
            if protected.contains(t) {
                let layer = if super::keys::PRODUCT_PROTECTED.contains(&t.as_str()) {
                    Layer::Product
                } else {
                    Layer::Organisation
                };
                out.limited.push(Limited {
                    item,
                    category: Category::ToolOverride,
                    cap: "deny".into(),
                    layer,
                });
                continue;
            }
            let verdict = if BUILT_IN_TOOLS.contains(&t.as_str()) {
                match self.admits(source_id, &item, Category::ToolOverride) {
                    // A name Berth has a built-in for is not held: it becomes a conflict the
                    // person decides while the built-in serves (`catalog::conflicts`). A
                    // refusal holds.
                    Err(l) if l.cap == "review" && has_berth_builtin(t) => Ok(()),
                    v => v,
                }
            } else {
                Ok(())
            };
            match verdict {
                Ok(()) => out.tools.push(t.clone()),
                Err(l) => out.limited.push(l),
            }
        }
        for h in hooks {
            let verdict = match hook_category(h) {
                Some(c) => self.admits(source_id, &format!("hook:{h}"), c),
                None => Ok(()),
            };
            match verdict {
                Ok(()) => out.hooks.push(h.clone()),
                Err(l) => out.limited.push(l),
            }
        }
        out
    }
}

/// Whether Berth has a built-in of its own for `name` (`berth-builtins`).
fn has_berth_builtin(name: &str) -> bool {
    berth_builtins::definitions().iter().any(|b| b.id == name)
}
