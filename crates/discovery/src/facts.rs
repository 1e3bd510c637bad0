//! Static facts about JavaScript/TypeScript files, read with a real parser (oxc) and never run.
//!
//! Owns: what a file imports, exports and which powerful APIs it names. Must not: execute,
//! import or resolve anything through a JS runtime; the result must be a pure function of the
//! bytes, so the capability digest that approvals key on is deterministic.

use std::collections::BTreeSet;
use std::path::Path;

use oxc_allocator::Allocator;
use oxc_ast::ast::{
    Argument, CallExpression, Expression, ImportExpression, NewExpression, ObjectPropertyKind,
    StaticMemberExpression, TaggedTemplateExpression,
};
use oxc_ast_visit::{walk, Visit};
use oxc_parser::Parser;
use oxc_span::SourceType;
use serde::Serialize;

/// What one file says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FileFacts {
    /// Export names in source order of first appearance, `default` included.
    pub exports: Vec<String>,
    /// Module specifiers imported statically (`import`, `export … from`).
    pub static_imports: BTreeSet<String>,
    /// Specifiers of `import("x")` with a literal argument.
    pub dynamic_imports: BTreeSet<String>,
    /// `import(expr)` with a computed argument: anything could be loaded.
    pub computed_dynamic_import: bool,
    /// Specifiers passed to `require("x")`.
    pub requires: BTreeSet<String>,
    /// Bun-only APIs named in the file: `Bun.spawn`, `bun:sqlite`, `$` (Bun shell), …
    pub bun_apis: BTreeSet<String>,
    pub process: BTreeSet<String>,
    pub network: BTreeSet<String>,
    pub filesystem: BTreeSet<String>,
    pub environment: BTreeSet<String>,
    /// Exports whose value is certainly not a tool definition (a function, class, literal, or
    /// an object literal without `args`, `description` and `execute`). OpenCode skips those
    /// silently when it names tools; everything else may be a tool.
    pub non_tool_exports: BTreeSet<String>,
    /// Parse errors, if any; facts are then partial.
    pub syntax_errors: Vec<String>,
}

impl FileFacts {
    /// Every module specifier the file may load.
    pub fn all_specifiers(&self) -> impl Iterator<Item = &String> {
        self.static_imports
            .iter()
            .chain(self.dynamic_imports.iter())
            .chain(self.requires.iter())
    }
}

/// Reads facts from `source`; `path` only chooses the dialect (.ts, .tsx, .mjs, …).
pub fn analyze(path: &Path, source: &str) -> FileFacts {
    let allocator = Allocator::default();
    let source_type = SourceType::from_path(path)
        .unwrap_or_else(|_| SourceType::mjs())
        .with_module(true);
    let parsed = Parser::new(&allocator, source, source_type).parse();
    let mut facts = FileFacts {
        syntax_errors: parsed
            .diagnostics
            .iter()
            .take(5)
            .map(|d| d.to_string())
            .collect(),
        ..FileFacts::default()
    };

    let record = &parsed.module_record;
    let mut seen = BTreeSet::new();
    let mut entries: Vec<_> = record
        .local_export_entries
        .iter()
        .chain(record.indirect_export_entries.iter())
        .filter(|e| !e.is_type)
        .collect();
    entries.sort_by_key(|e| e.span.start);
    for entry in entries {
        let name = match &entry.export_name {
            oxc_syntax::module_record::ExportExportName::Name(n) => n.name.to_string(),
            oxc_syntax::module_record::ExportExportName::Default(_) => "default".to_string(),
            _ => continue,
        };
        if seen.insert(name.clone()) {
            facts.exports.push(name);
        }
    }
    for (specifier, requests) in record.requested_modules.iter() {
        if requests.iter().all(|r| r.is_type) {
            continue;
        }
        facts.static_imports.insert(specifier.to_string());
    }
    if !record.star_export_entries.is_empty() {
        // `export * from "x"`: names are unknown until load; the loaded module tells.
        facts.exports.push("*".to_string());
    }

    classify_exports(&parsed.program, &mut facts);
    let mut visitor = ApiVisitor { facts: &mut facts };
    visitor.visit_program(&parsed.program);
    classify_modules(&mut facts);
    facts
}

/// Whether an exported value can be a tool definition: `Some(false)` when it certainly is not.
fn maybe_tool(e: &Expression<'_>) -> bool {
    match e {
        Expression::ObjectExpression(o) => {
            let keys: BTreeSet<String> = o
                .properties
                .iter()
                .filter_map(|p| match p {
                    ObjectPropertyKind::ObjectProperty(p) => {
                        p.key.static_name().map(|k| k.to_string())
                    }
                    ObjectPropertyKind::SpreadProperty(_) => Some("...".into()),
                })
                .collect();
            keys.contains("...")
                || ["args", "description", "execute"]
                    .iter()
                    .all(|k| keys.contains(*k))
        }
        Expression::ParenthesizedExpression(p) => maybe_tool(&p.expression),
        Expression::TSAsExpression(a) => maybe_tool(&a.expression),
        Expression::TSSatisfiesExpression(a) => maybe_tool(&a.expression),
        Expression::ArrowFunctionExpression(_)
        | Expression::FunctionExpression(_)
        | Expression::ClassExpression(_)
        | Expression::BooleanLiteral(_)
        | Expression::NullLiteral(_)
        | Expression::NumericLiteral(_)
        | Expression::BigIntLiteral(_)
        | Expression::RegExpLiteral(_)
        | Expression::StringLiteral(_)
        | Expression::TemplateLiteral(_)
        | Expression::ArrayExpression(_) => false,
        // Calls (`tool({...})`), identifiers and the rest: may be a tool.
        _ => true,
    }
}

fn classify_exports(program: &oxc_ast::ast::Program<'_>, facts: &mut FileFacts) {
    use oxc_ast::ast::{Declaration, Statement};
    for stmt in &program.body {
        match stmt {
            Statement::ExportDeclaration(d) => match &d.declaration {
                Declaration::VariableDeclaration(v) => {
                    for decl in &v.declarations {
                        let Some(name) = decl.id.get_identifier_name() else {
                            continue;
                        };
                        if decl.init.as_ref().is_some_and(|e| !maybe_tool(e)) {
                            facts.non_tool_exports.insert(name.to_string());
                        }
                    }
                }
                Declaration::FunctionDeclaration(f) => {
                    if let Some(id) = &f.id {
                        facts.non_tool_exports.insert(id.name.to_string());
                    }
                }
                Declaration::ClassDeclaration(c) => {
                    if let Some(id) = &c.id {
                        facts.non_tool_exports.insert(id.name.to_string());
                    }
                }
                _ => {}
            },
            Statement::ExportDefaultDeclaration(d) => {
                let certain_not = match d.declaration.as_expression() {
                    Some(e) => !maybe_tool(e),
                    None => true,
                };
                if certain_not {
                    facts.non_tool_exports.insert("default".into());
                }
            }
            _ => {}
        }
    }
}

/// Module specifiers that grant a capability by being imported.
fn classify_modules(facts: &mut FileFacts) {
    let specs: Vec<String> = facts.all_specifiers().cloned().collect();
    for spec in specs {
        let bare = spec.strip_prefix("node:").unwrap_or(&spec);
        match bare {
            "child_process" | "worker_threads" | "cluster" | "execa" | "cross-spawn"
            | "node-pty" | "bun-pty" => {
                facts.process.insert(spec.clone());
            }
            "net" | "http" | "https" | "http2" | "dgram" | "tls" | "dns" | "undici"
            | "node-fetch" | "axios" | "ws" | "got" => {
                facts.network.insert(spec.clone());
            }
            "fs" | "fs/promises" => {
                facts.filesystem.insert(spec.clone());
            }
            _ => {}
        }
        if spec.starts_with("bun:") {
            facts.bun_apis.insert(spec.clone());
            if spec == "bun:ffi" {
                facts.process.insert(spec.clone());
            }
        }
        if spec == "bun" {
            facts.bun_apis.insert("bun".to_string());
        }
    }
}

struct ApiVisitor<'f> {
    facts: &'f mut FileFacts,
}

fn ident_name<'a>(e: &'a Expression<'_>) -> Option<&'a str> {
    match e {
        Expression::Identifier(id) => Some(id.name.as_str()),
        _ => None,
    }
}

fn literal_arg<'a>(args: &'a [Argument<'_>]) -> Option<&'a str> {
    match args.first() {
        Some(Argument::StringLiteral(s)) => Some(s.value.as_str()),
        Some(Argument::TemplateLiteral(t)) if t.expressions.is_empty() => {
            t.quasis.first().map(|q| q.value.raw.as_str())
        }
        _ => None,
    }
}

impl<'a> Visit<'a> for ApiVisitor<'_> {
    fn visit_static_member_expression(&mut self, it: &StaticMemberExpression<'a>) {
        let prop = it.property.name.as_str();
        match ident_name(&it.object) {
            Some("Bun") => {
                let api = format!("Bun.{prop}");
                self.facts.bun_apis.insert(api.clone());
                match prop {
                    "spawn" | "spawnSync" | "$" => {
                        self.facts.process.insert(api);
                    }
                    "file" | "write" | "Glob" => {
                        self.facts.filesystem.insert(api);
                    }
                    "serve" | "connect" | "listen" | "udpSocket" => {
                        self.facts.network.insert(api);
                    }
                    "env" => {
                        self.facts.environment.insert(api);
                    }
                    _ => {}
                }
            }
            Some("process") => match prop {
                "env" => {
                    self.facts.environment.insert("process.env".into());
                }
                "binding" | "dlopen" | "kill" => {
                    self.facts.process.insert(format!("process.{prop}"));
                }
                _ => {}
            },
            Some("Deno") => {
                self.facts.bun_apis.insert(format!("Deno.{prop}"));
            }
            _ => {}
        }
        walk::walk_static_member_expression(self, it);
    }

    fn visit_call_expression(&mut self, it: &CallExpression<'a>) {
        match ident_name(&it.callee) {
            Some("require") => {
                if let Some(spec) = literal_arg(&it.arguments) {
                    self.facts.requires.insert(spec.to_string());
                } else {
                    self.facts.computed_dynamic_import = true;
                }
            }
            Some("fetch") => {
                self.facts.network.insert("fetch".into());
            }
            Some("eval") | Some("Function") => {
                self.facts.process.insert("eval".into());
            }
            _ => {}
        }
        walk::walk_call_expression(self, it);
    }

    fn visit_new_expression(&mut self, it: &NewExpression<'a>) {
        match ident_name(&it.callee) {
            Some(n @ ("WebSocket" | "XMLHttpRequest" | "EventSource")) => {
                self.facts.network.insert(n.to_string());
            }
            Some("Worker") => {
                self.facts.process.insert("Worker".into());
            }
            Some("Function") => {
                self.facts.process.insert("eval".into());
            }
            _ => {}
        }
        walk::walk_new_expression(self, it);
    }

    fn visit_import_expression(&mut self, it: &ImportExpression<'a>) {
        match &it.source {
            Expression::StringLiteral(s) => {
                self.facts.dynamic_imports.insert(s.value.to_string());
            }
            Expression::TemplateLiteral(t) if t.expressions.is_empty() => {
                if let Some(q) = t.quasis.first() {
                    self.facts.dynamic_imports.insert(q.value.raw.to_string());
                }
            }
            _ => self.facts.computed_dynamic_import = true,
        }
        walk::walk_import_expression(self, it);
    }

    fn visit_tagged_template_expression(&mut self, it: &TaggedTemplateExpression<'a>) {
        // `$\`cmd\`` is Bun's shell: the plugin input's `$` or `import { $ } from "bun"`.
        if ident_name(&it.tag) == Some("$") {
            self.facts.bun_apis.insert("$".into());
            self.facts.process.insert("$ (Bun shell)".into());
        }
        walk::walk_tagged_template_expression(self, it);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(src: &str) -> FileFacts {
        analyze(Path::new("x.ts"), src)
    }

    #[test]
    fn exports_come_in_source_order_without_types() {
        let f = facts(
            "export type T = string; export const b = 1; export default {}; export function a() {}\n\
             export { x as y } from './m'",
        );
        assert_eq!(f.exports, ["b", "default", "a", "y"]);
    }

    #[test]
    fn imports_of_every_kind_are_found() {
        let f = facts(
            "import { tool } from '@opencode-ai/plugin'; import type { X } from 'types-only';\n\
             const m = await import('lazy'); const r = require('cjs'); import(`tpl`); import(name);",
        );
        assert!(f.static_imports.contains("@opencode-ai/plugin"));
        assert!(!f.static_imports.contains("types-only"));
        assert!(f.dynamic_imports.contains("lazy") && f.dynamic_imports.contains("tpl"));
        assert!(f.requires.contains("cjs"));
        assert!(f.computed_dynamic_import);
    }

    #[test]
    fn powerful_apis_are_named() {
        let f = facts(
            "import { spawn } from 'node:child_process'; import { Database } from 'bun:sqlite';\n\
             Bun.spawn(['ls']); await fetch('x'); const k = process.env.KEY; await $`ls`; Bun.file('a')",
        );
        assert!(f.process.contains("Bun.spawn") && f.process.contains("node:child_process"));
        assert!(f.process.contains("$ (Bun shell)"));
        assert!(f.bun_apis.contains("bun:sqlite") && f.bun_apis.contains("Bun.file"));
        assert!(f.network.contains("fetch"));
        assert!(f.environment.contains("process.env"));
        assert!(f.filesystem.contains("Bun.file"));
    }

    #[test]
    fn exports_that_cannot_be_tools_are_told_apart() {
        let f = facts(
            "export const a = tool({ description: 'x', args: {}, execute: async () => 'x' })\n\
             export const b = { description: 'helper' }\nexport const c = 42\nexport function d() {}\n\
             export const e = { args: {}, description: '', execute() {} }\nexport default someValue",
        );
        assert_eq!(
            f.non_tool_exports
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            ["b", "c", "d"]
        );
    }

    #[test]
    fn a_string_literal_change_changes_no_fact() {
        let a = facts("export default { id: 'a', server: async () => ({ x: 'one' }) }");
        let b = facts("export default { id: 'a', server: async () => ({ x: 'two' }) }");
        assert_eq!(a, b);
    }

    #[test]
    fn broken_syntax_is_reported_not_fatal() {
        let f = facts("export const = ;");
        assert!(!f.syntax_errors.is_empty());
    }
}
