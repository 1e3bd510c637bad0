//! Static facts about JavaScript/TypeScript files, read with a real parser (oxc) and never run.
//!
//! Owns: what a file imports, exports and which powerful APIs it names, and the constructs whose
//! effect a static reader cannot resolve (`opaque`). Must not: execute, import or resolve
//! anything through a JS runtime; the result must be a pure function of the bytes, so the
//! capability digest that approvals key on is deterministic.
//!
//! The facts are a preview, not a boundary: they name what the code says, and flag as opaque
//! what could reach anything (`Bun[name]`, `(0, eval)(code)`, `createRequire`, …), so that the
//! person is told "may do anything" instead of a reassuring, incomplete list.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use oxc_allocator::Allocator;
use oxc_ast::ast::{
    Argument, ArrowFunctionBody, ArrowFunctionExpression, AssignmentExpression, AssignmentPattern,
    AssignmentTarget, AssignmentTargetProperty, AssignmentTargetPropertyIdentifier,
    AssignmentTargetPropertyProperty, BinaryExpression, BindingPattern, BindingProperty,
    BlockStatement, CallExpression, CatchClause, ChainElement, Class, ComputedMemberExpression,
    ConditionalExpression, Declaration, DoWhileStatement, ExportAllDeclaration,
    ExportDefaultDeclarationKind, ExportFromDeclaration, ExportNamedDeclaration, Expression,
    ForInStatement, ForOfStatement, ForStatement, ForStatementInit, ForStatementLeft,
    FormalParameter, FormalParameters, Function, FunctionType, IfStatement, ImportDeclaration,
    ImportDeclarationSpecifier, ImportExpression, LogicalExpression, ModuleExportName,
    NewExpression, ObjectPattern, ObjectPropertyKind, Program, PropertyKey, Statement, StaticBlock,
    StaticMemberExpression, SwitchStatement, TSImportEqualsDeclaration, TSModuleReference,
    TSTypeName, TaggedTemplateExpression, UnaryExpression, VariableDeclaration,
    VariableDeclarationKind, VariableDeclarator, WhileStatement,
};
use oxc_ast_visit::{walk, Visit};
use oxc_parser::Parser;
use oxc_span::{GetSpan, SourceType, Span};
use oxc_syntax::operator::{BinaryOperator, UnaryOperator};
use oxc_syntax::scope::ScopeFlags;
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
    /// Specifiers loaded synchronously by name: `require("x")`, `import.meta.require("x")`,
    /// TypeScript's `import x = require("x")` and `process.getBuiltinModule("x")`.
    pub requires: BTreeSet<String>,
    /// Bun-only APIs named in the file: `Bun.spawn`, `bun:sqlite`, `$` (Bun shell), …
    pub bun_apis: BTreeSet<String>,
    pub process: BTreeSet<String>,
    pub network: BTreeSet<String>,
    pub filesystem: BTreeSet<String>,
    pub environment: BTreeSet<String>,
    /// Constructs whose effect a static reader cannot resolve, each a short label naming the
    /// construct (`"computed member of Bun"`, `"indirect eval"`, `"node:vm"`, …). Each one may
    /// do anything: the person is shown them as such.
    pub opaque: BTreeSet<String>,
    /// Exports whose value is certainly not a tool definition (a function, class, literal, or
    /// an object literal without `args`, `description` and `execute`). OpenCode skips those
    /// silently when it names tools; everything else may be a tool.
    pub non_tool_exports: BTreeSet<String>,
    /// The keys of the default export when it is an object a reader can see (written in
    /// place, through `Plugin.define({...})`, or as a top-level `const` exported by name): what
    /// tells an OpenCode V1 plugin (`server`) from a V2 one (`setup` / `effect`).
    pub default_shape: Option<DefaultShape>,
    /// Parse errors, if any; facts are then partial.
    pub syntax_errors: Vec<String>,
}

/// The plugin-facing keys of a default export object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DefaultShape {
    /// `id` when it is a string literal.
    pub id: Option<String>,
    pub server: bool,
    pub setup: bool,
    pub effect: bool,
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
///
/// The parser and the walk over its tree recurse once per nesting level, and a file can nest
/// as deep as it is long (`[[[[…` or `1+1+1+…`): the reading runs on a thread whose stack has
/// room for the file's length at any nesting (reserved, not committed, until used), so no file
/// can overflow Berth's stack. Each calling thread keeps one such reader for files up to
/// `READER_BYTES` (starting a thread per file cost a scan of 1,000 tool files a fifth of its
/// time); a longer file gets a thread sized for it. A file nested deeper than `MAX_NESTING`
/// brackets is not parsed at all.
pub fn analyze(path: &Path, source: &str) -> FileFacts {
    let depth = bracket_depth(source);
    if depth > MAX_NESTING {
        return unread(format!(
            "brackets nest {depth} levels deep (more than {MAX_NESTING}); Berth does not read a file like this"
        ));
    }
    if source.len() <= READER_BYTES {
        if let Some(facts) = READER.with(|r| r.read(path, source)) {
            return facts;
        }
    }
    let stack = STACK_BASE + STACK_PER_BYTE * source.len();
    std::thread::scope(|scope| {
        let reading = std::thread::Builder::new()
            .name("berth-facts".into())
            .stack_size(stack)
            .spawn_scoped(scope, || analyze_here(path, source));
        match reading.map(|r| r.join()) {
            Ok(Ok(facts)) => facts,
            Ok(Err(_)) => unread("its reading failed".to_string()),
            Err(e) => unread(format!("no room to read it ({e})")),
        }
    })
}

fn unread(why: String) -> FileFacts {
    FileFacts {
        syntax_errors: vec![why],
        opaque: BTreeSet::from(["a file Berth could not read".to_string()]),
        ..FileFacts::default()
    }
}

/// The deepest bracket nesting a file may have and still be read.
pub const MAX_NESTING: usize = 2_000;
/// A reading thread's stack: a base, and enough per source byte for a file that nests once
/// per operator (measured: under 400 bytes a level in a debug build).
const STACK_BASE: usize = 32 << 20;
const STACK_PER_BYTE: usize = 512;
/// The longest file the calling thread's kept reader takes (its stack is sized for it).
const READER_BYTES: usize = 128 << 10;

type Job = (PathBuf, String, std::sync::mpsc::Sender<FileFacts>);

/// One calling thread's kept reader: a thread with a `READER_BYTES`-sized stack, started on
/// first use, ending with the calling thread (its job sender drops).
struct Reader(std::cell::RefCell<Option<std::sync::mpsc::Sender<Job>>>);

thread_local! {
    static READER: Reader = const { Reader(std::cell::RefCell::new(None)) };
}

impl Reader {
    /// `None` when no reader could start or it failed: the caller reads another way.
    fn read(&self, path: &Path, source: &str) -> Option<FileFacts> {
        let mut slot = self.0.borrow_mut();
        if slot.is_none() {
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("berth-facts".into())
                .stack_size(STACK_BASE + STACK_PER_BYTE * READER_BYTES)
                .spawn(move || {
                    for (path, source, answer) in rx {
                        let _ = answer.send(analyze_here(&path, &source));
                    }
                })
                .ok()?;
            *slot = Some(tx);
        }
        let (answer, facts) = std::sync::mpsc::channel();
        let sent = slot
            .as_ref()?
            .send((path.to_path_buf(), source.to_string(), answer));
        match sent.ok().and_then(|()| facts.recv().ok()) {
            Some(f) => Some(f),
            None => {
                // The reader is gone (a panic in the parser): the next file starts another.
                *slot = None;
                Some(unread("its reading failed".to_string()))
            }
        }
    }
}

/// The deepest nesting of `(`, `[` and `{` in `source`, counted over the raw text (brackets in
/// strings and comments count too: an overestimate, never an underestimate).
fn bracket_depth(source: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for b in source.bytes() {
        match b {
            b'(' | b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

fn analyze_here(path: &Path, source: &str) -> FileFacts {
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
    let mut visitor = ApiVisitor::new(&mut facts);
    visitor.visit_program(&parsed.program);
    classify_modules(&mut facts);
    facts
}

/// The plugin keys of a default export: an object literal, `define({...})` /
/// `Plugin.define({...})`, or an identifier bound to one of those by a top-level `const`.
fn default_shape(program: &Program<'_>, e: &Expression<'_>) -> Option<DefaultShape> {
    match e.without_parentheses() {
        Expression::ObjectExpression(o) => {
            let mut shape = DefaultShape::default();
            for p in &o.properties {
                let ObjectPropertyKind::ObjectProperty(p) = p else {
                    continue;
                };
                match p.key.static_name().as_deref() {
                    Some("id") => {
                        if let Expression::StringLiteral(s) = p.value.without_parentheses() {
                            shape.id = Some(s.value.to_string());
                        }
                    }
                    Some("server") => shape.server = true,
                    Some("setup") => shape.setup = true,
                    Some("effect") => shape.effect = true,
                    _ => {}
                }
            }
            Some(shape)
        }
        Expression::CallExpression(c) => {
            let define = match &c.callee {
                Expression::Identifier(i) => i.name == "define",
                Expression::StaticMemberExpression(m) => m.property.name == "define",
                _ => false,
            };
            let arg = c.arguments.first()?.as_expression()?;
            if define {
                default_shape(program, arg)
            } else {
                None
            }
        }
        Expression::TSAsExpression(a) => default_shape(program, &a.expression),
        Expression::TSSatisfiesExpression(a) => default_shape(program, &a.expression),
        Expression::Identifier(i) => program.body.iter().find_map(|stmt| {
            let v = match stmt {
                Statement::VariableDeclaration(v) => v,
                Statement::ExportDeclaration(d) => match &d.declaration {
                    Declaration::VariableDeclaration(v) => v,
                    _ => return None,
                },
                _ => return None,
            };
            if v.kind != VariableDeclarationKind::Const {
                return None;
            }
            v.declarations.iter().find_map(|d| {
                (d.id.get_identifier_name().as_deref() == Some(i.name.as_str()))
                    .then_some(d.init.as_ref())
                    .flatten()
                    .filter(|init| !matches!(init.without_parentheses(), Expression::Identifier(_)))
                    .and_then(|init| default_shape(program, init))
            })
        }),
        _ => None,
    }
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
                facts.default_shape = d
                    .declaration
                    .as_expression()
                    .and_then(|e| default_shape(program, e));
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
            // Both compile or load arbitrary code: `vm.runInThisContext`, `createRequire`,
            // `Module._load`, loader hooks.
            "vm" => {
                facts.opaque.insert("node:vm".into());
            }
            "module" => {
                facts.opaque.insert("node:module".into());
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

/// How a parent uses an expression it has already accounted for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    /// Object of a static member access (`Bun.file`).
    Object,
    /// Called (`require("x")`), classified by the call rule.
    Callee,
    /// Only tested: `typeof Bun`, `"Bun" in globalThis`, `if (globalThis.Bun)`, `x === process`.
    Test,
    /// Destructured with static keys, each classified as its member.
    Destructured,
    /// A member call the call rule fully classified (`process.getBuiltinModule("fs")`).
    Handled,
}

/// What an expression stands for, when it is a global or a name reached through one.
#[derive(Debug, Clone)]
struct Root {
    /// `Bun`, `process`, `fetch`, `import.meta`, …; an alias reads as what it stands for.
    name: String,
    /// Bound by a declaration in scope: then not the global of that name.
    local: bool,
}

/// Objects whose members are the globals themselves.
const GLOBAL_OBJECTS: &[&str] = &["globalThis", "global", "self", "window"];

/// Label of a root that must not escape as a value: whoever holds it may reach anything.
fn value_label(name: &str) -> Option<String> {
    match name {
        "Bun" | "process" | "Deno" | "globalThis" | "global" | "self" | "window" | "eval"
        | "require" | "import.meta" => Some(format!("{name} used as a value")),
        "Function" => Some("Function constructor".into()),
        _ => None,
    }
}

/// Roots whose computed members cannot be resolved statically.
fn reaches_anything(name: &str) -> bool {
    matches!(name, "Bun" | "process" | "Deno" | "require" | "import.meta")
        || GLOBAL_OBJECTS.contains(&name)
}

/// The namespace a module specifier stands for: `bun` is `Bun`, `node:process` is `process`.
fn namespace_of(spec: &str) -> Option<&'static str> {
    match spec {
        "bun" => Some("Bun"),
        "process" | "node:process" => Some("process"),
        _ => None,
    }
}

fn key(span: Span) -> (u32, u32) {
    (span.start, span.end)
}

/// Strips what does not change the value: parentheses, TypeScript wrappers, and all but the
/// last expression of a sequence (`(0, eval)` is `eval`).
fn strip<'b, 'a>(mut e: &'b Expression<'a>) -> &'b Expression<'a> {
    loop {
        e = match e {
            Expression::ParenthesizedExpression(p) => &p.expression,
            Expression::TSAsExpression(x) => &x.expression,
            Expression::TSSatisfiesExpression(x) => &x.expression,
            Expression::TSNonNullExpression(x) => &x.expression,
            Expression::TSTypeAssertion(x) => &x.expression,
            Expression::TSInstantiationExpression(x) => &x.expression,
            Expression::SequenceExpression(s) => match s.expressions.last() {
                Some(last) => last,
                None => return e,
            },
            _ => return e,
        };
    }
}

fn literal_expr<'b>(e: &'b Expression<'_>) -> Option<&'b str> {
    match strip(e) {
        Expression::StringLiteral(s) => Some(s.value.as_str()),
        Expression::TemplateLiteral(t) if t.expressions.is_empty() => {
            t.quasis.first().map(|q| q.value.raw.as_str())
        }
        _ => None,
    }
}

fn literal_arg<'b>(args: &'b [Argument<'_>]) -> Option<&'b str> {
    args.first()
        .and_then(|a| a.as_expression())
        .and_then(literal_expr)
}

/// `object.prop` or `object["prop"]`: the object, the property name and the member's span.
fn literal_member<'b, 'a>(e: &'b Expression<'a>) -> Option<(&'b Expression<'a>, &'b str, Span)> {
    match strip(e) {
        Expression::StaticMemberExpression(m) => {
            Some((&m.object, m.property.name.as_str(), m.span))
        }
        Expression::ComputedMemberExpression(m) => {
            literal_expr(&m.expression).map(|k| (&m.object, k, m.span))
        }
        _ => None,
    }
}

/// `setTimeout("code")`: a string (or a concatenation with one) where a function belongs.
fn is_code_string(e: &Expression<'_>) -> bool {
    match strip(e) {
        Expression::StringLiteral(_) | Expression::TemplateLiteral(_) => true,
        Expression::BinaryExpression(b) if b.operator == BinaryOperator::Addition => {
            is_code_string(&b.left) || is_code_string(&b.right)
        }
        _ => false,
    }
}

/// The tag of a Bun shell template: `$`, `x.$`, or a chain on them (`$.cwd("/")`, `$.nothrow()`).
fn is_shell_tag(e: &Expression<'_>) -> bool {
    match strip(e) {
        Expression::Identifier(id) => id.name == "$",
        Expression::StaticMemberExpression(m) => m.property.name == "$" || is_shell_tag(&m.object),
        Expression::CallExpression(c) => is_shell_tag(&c.callee),
        _ => false,
    }
}

/// `x.constructor` where `x` is a function or itself a `.constructor`: the Function constructor.
fn is_function_constructor(object: &Expression<'_>) -> bool {
    match strip(object) {
        Expression::StaticMemberExpression(m) => m.property.name == "constructor",
        Expression::FunctionExpression(_) | Expression::ArrowFunctionExpression(_) => true,
        _ => false,
    }
}

fn static_key<'b>(k: &'b PropertyKey<'_>) -> Option<std::borrow::Cow<'b, str>> {
    k.static_name()
}

/// Names a binding pattern declares; default values are not patterns and are skipped, so the
/// parameters of an arrow inside a default never count as declared here.
fn pattern_names(p: &BindingPattern<'_>, out: &mut HashSet<String>) {
    match p {
        BindingPattern::BindingIdentifier(id) => {
            out.insert(id.name.to_string());
        }
        BindingPattern::ObjectPattern(o) => {
            for prop in &o.properties {
                pattern_names(&prop.value, out);
            }
            if let Some(rest) = &o.rest {
                pattern_names(&rest.argument, out);
            }
        }
        BindingPattern::ArrayPattern(a) => {
            for el in a.elements.iter().flatten() {
                pattern_names(el, out);
            }
            if let Some(rest) = &a.rest {
                pattern_names(&rest.argument, out);
            }
        }
        BindingPattern::AssignmentPattern(a) => pattern_names(&a.left, out),
    }
}

fn params_names(params: &FormalParameters<'_>, out: &mut HashSet<String>) {
    for p in &params.items {
        pattern_names(&p.pattern, out);
    }
    if let Some(rest) = &params.rest {
        pattern_names(&rest.rest.argument, out);
    }
}

/// `var` declarations of a function body or program, not descending into nested functions.
struct VarNames<'o> {
    out: &'o mut HashSet<String>,
}

impl<'a> Visit<'a> for VarNames<'_> {
    fn visit_variable_declaration(&mut self, it: &VariableDeclaration<'a>) {
        if it.kind == VariableDeclarationKind::Var && !it.declare {
            for d in &it.declarations {
                pattern_names(&d.id, self.out);
            }
        }
    }
    fn visit_expression(&mut self, _: &Expression<'a>) {}
    fn visit_function(&mut self, _: &Function<'a>, _: ScopeFlags) {}
    fn visit_class(&mut self, _: &Class<'a>) {}
}

/// Declarations that bind in the scope of this statement list (not `var`, which hoists).
/// TypeScript `declare` forms and type-only imports bind nothing at run time.
fn lexical_names(stmts: &[Statement<'_>], out: &mut HashSet<String>) {
    fn declaration(d: &Declaration<'_>, out: &mut HashSet<String>) {
        match d {
            Declaration::VariableDeclaration(v) if !v.declare => {
                for d in &v.declarations {
                    pattern_names(&d.id, out);
                }
            }
            Declaration::FunctionDeclaration(f) if !f.declare && f.body.is_some() => {
                if let Some(id) = &f.id {
                    out.insert(id.name.to_string());
                }
            }
            Declaration::ClassDeclaration(c) if !c.declare => {
                if let Some(id) = &c.id {
                    out.insert(id.name.to_string());
                }
            }
            Declaration::TSImportEqualsDeclaration(i) if i.import_kind.is_value() => {
                out.insert(i.id.name.to_string());
            }
            _ => {}
        }
    }
    for stmt in stmts {
        match stmt {
            Statement::ImportDeclaration(i) if i.import_kind.is_value() => {
                for spec in i.specifiers.iter().flatten() {
                    let local = match spec {
                        ImportDeclarationSpecifier::ImportSpecifier(s)
                            if s.import_kind.is_value() =>
                        {
                            &s.local
                        }
                        ImportDeclarationSpecifier::ImportSpecifier(_) => continue,
                        ImportDeclarationSpecifier::ImportDefaultSpecifier(s) => &s.local,
                        ImportDeclarationSpecifier::ImportNamespaceSpecifier(s) => &s.local,
                    };
                    out.insert(local.name.to_string());
                }
            }
            Statement::ExportDeclaration(e) => declaration(&e.declaration, out),
            Statement::ExportDefaultDeclaration(e) => match &e.declaration {
                ExportDefaultDeclarationKind::FunctionDeclaration(f) => {
                    if let Some(id) = &f.id {
                        out.insert(id.name.to_string());
                    }
                }
                ExportDefaultDeclarationKind::ClassDeclaration(c) => {
                    if let Some(id) = &c.id {
                        out.insert(id.name.to_string());
                    }
                }
                _ => {}
            },
            other => {
                if let Some(d) = other.as_declaration() {
                    declaration(d, out);
                }
            }
        }
    }
}

fn body_names(stmts: &[Statement<'_>], out: &mut HashSet<String>) {
    let mut vars = VarNames { out };
    for s in stmts {
        vars.visit_statement(s);
    }
    lexical_names(stmts, out);
}

struct ApiVisitor<'f> {
    facts: &'f mut FileFacts,
    /// Names declared in each enclosing scope, innermost last. A name missing here reads as
    /// the global: an unknown declaration form can only add opaque entries, never hide one.
    scopes: Vec<HashSet<String>>,
    /// Local names that stand for a namespace: `import * as B from "bun"` makes `B` mean `Bun`.
    aliases: HashMap<String, &'static str>,
    /// Expressions a parent already accounted for, by span.
    uses: HashMap<(u32, u32), Use>,
}

impl<'f> ApiVisitor<'f> {
    fn new(facts: &'f mut FileFacts) -> Self {
        ApiVisitor {
            facts,
            scopes: Vec::new(),
            aliases: HashMap::new(),
            uses: HashMap::new(),
        }
    }

    fn opaque(&mut self, label: impl Into<String>) {
        self.facts.opaque.insert(label.into());
    }

    fn shell(&mut self) {
        self.facts.bun_apis.insert("$".into());
        self.facts.process.insert("$ (Bun shell)".into());
    }

    fn is_local(&self, name: &str) -> bool {
        self.scopes.iter().any(|s| s.contains(name))
    }

    fn with_scope(&mut self, names: HashSet<String>, f: impl FnOnce(&mut Self)) {
        self.scopes.push(names);
        f(self);
        self.scopes.pop();
    }

    /// Marks `e` (and what [`strip`] sees through) as accounted for by its parent.
    fn consume(&mut self, e: &Expression<'_>, how: Use) {
        let mut e = e;
        loop {
            self.uses.insert(key(e.span()), how);
            e = match e {
                Expression::ParenthesizedExpression(p) => &p.expression,
                Expression::TSAsExpression(x) => &x.expression,
                Expression::TSSatisfiesExpression(x) => &x.expression,
                Expression::TSNonNullExpression(x) => &x.expression,
                Expression::TSTypeAssertion(x) => &x.expression,
                Expression::TSInstantiationExpression(x) => &x.expression,
                Expression::AwaitExpression(a) => &a.argument,
                Expression::SequenceExpression(s) => match s.expressions.last() {
                    Some(last) => last,
                    None => return,
                },
                _ => return,
            };
        }
    }

    fn use_of(&self, span: Span) -> Option<Use> {
        self.uses.get(&key(span)).copied()
    }

    /// What the identifier `name` stands for here.
    fn named(&self, name: &str) -> Root {
        match self.aliases.get(name) {
            Some(ns) => Root {
                name: (*ns).to_string(),
                local: false,
            },
            None => Root {
                name: name.to_string(),
                local: self.is_local(name),
            },
        }
    }

    /// What `e` stands for: a global (`Bun`), a global reached through the global object
    /// (`globalThis.Bun`, `self["fetch"]`), `import.meta`, or a namespace loaded by a literal
    /// name (`require("bun")`, `await import("bun")`, an import alias).
    fn root_of(&self, e: &Expression<'_>) -> Option<Root> {
        match strip(e) {
            Expression::Identifier(id) => Some(self.named(id.name.as_str())),
            Expression::ImportMeta(_) => Some(Root {
                name: "import.meta".into(),
                local: false,
            }),
            e @ (Expression::StaticMemberExpression(_)
            | Expression::ComputedMemberExpression(_)) => {
                let (object, prop, _) = literal_member(e)?;
                self.global_member(object, prop)
            }
            Expression::ChainExpression(c) => match &c.expression {
                ChainElement::StaticMemberExpression(m) => {
                    self.global_member(&m.object, m.property.name.as_str())
                }
                ChainElement::ComputedMemberExpression(m) => {
                    literal_expr(&m.expression).and_then(|k| self.global_member(&m.object, k))
                }
                _ => None,
            },
            Expression::CallExpression(c) if self.loads_by_name(&c.callee) => {
                literal_arg(&c.arguments)
                    .and_then(namespace_of)
                    .map(|ns| Root {
                        name: ns.to_string(),
                        local: false,
                    })
            }
            Expression::AwaitExpression(a) => match strip(&a.argument) {
                Expression::ImportExpression(i) => literal_expr(&i.source)
                    .and_then(namespace_of)
                    .map(|ns| Root {
                        name: ns.to_string(),
                        local: false,
                    }),
                _ => None,
            },
            _ => None,
        }
    }

    /// `object.name` where `object` is the global object: the global `name` itself.
    fn global_member(&self, object: &Expression<'_>, name: &str) -> Option<Root> {
        let root = self.root_of(object)?;
        GLOBAL_OBJECTS.contains(&root.name.as_str()).then(|| Root {
            name: name.to_string(),
            local: root.local,
        })
    }

    /// `require`, `import.meta.require`, or either reached through the global object.
    fn loads_by_name(&self, callee: &Expression<'_>) -> bool {
        if let Some((object, "require", _)) = literal_member(callee) {
            if matches!(strip(object), Expression::ImportMeta(_)) {
                return true;
            }
        }
        self.root_of(callee).is_some_and(|r| r.name == "require")
    }

    /// A member `root.prop` read (not called by a rule that classified it already), classified
    /// exactly as the static member would be.
    fn member(&mut self, root: &Root, prop: &str, how: Option<Use>) {
        let tested = how == Some(Use::Test);
        let handled = how == Some(Use::Handled);
        match root.name.as_str() {
            "Bun" => {
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
            "process" => match prop {
                "env" => {
                    self.facts.environment.insert("process.env".into());
                }
                "binding" | "dlopen" | "kill" => {
                    self.facts.process.insert(format!("process.{prop}"));
                }
                "mainModule" | "getBuiltinModule" if !root.local && !tested && !handled => {
                    self.opaque(format!("process.{prop}"));
                }
                _ => {}
            },
            "Deno" => {
                self.facts.bun_apis.insert(format!("Deno.{prop}"));
            }
            _ if root.local => {}
            "require" => match prop {
                "cache" | "main" | "extensions" if !tested => {
                    self.opaque(format!("require.{prop}"));
                }
                "call" | "apply" | "bind" => self.opaque("require used as a value"),
                _ => {}
            },
            "module" if matches!(prop, "require" | "constructor") && !tested => {
                self.opaque(format!("module.{prop}"));
            }
            "import.meta" if prop == "require" && !tested && !handled => {
                self.opaque("import.meta.require");
            }
            "eval" if matches!(prop, "call" | "apply" | "bind") => {
                self.facts.process.insert("eval".into());
                self.opaque("indirect eval");
            }
            "Function" if matches!(prop, "call" | "apply" | "bind") => {
                self.facts.process.insert("eval".into());
                self.opaque("Function constructor");
            }
            "fetch" if matches!(prop, "call" | "apply" | "bind") => {
                self.facts.network.insert("fetch".into());
            }
            _ => {}
        }
    }

    /// A global read as a value under its own name (`const { fetch } = globalThis`).
    fn global_value(&mut self, name: &str) {
        if name == "fetch" {
            self.facts.network.insert("fetch".into());
        }
        if let Some(label) = value_label(name) {
            self.opaque(label);
        }
    }

    /// Shared by static and computed members: `prop` is `None` when it is not a literal.
    fn visit_member(&mut self, object: &Expression<'_>, prop: Option<&str>, span: Span) {
        match prop {
            // `typeof input.$` only looks, like `typeof Bun`.
            Some("$")
                if self.use_of(span) != Some(Use::Test)
                    && self.root_of(object).is_none_or(|r| r.name != "Bun") =>
            {
                self.shell();
            }
            Some("createRequire") => self.opaque("createRequire"),
            Some("constructor") if is_function_constructor(object) => {
                self.opaque("Function constructor")
            }
            _ => {}
        }
        let Some(root) = self.root_of(object) else {
            return;
        };
        self.consume(object, Use::Object);
        match prop {
            Some(p) => {
                let how = self.use_of(span);
                self.member(&root, p, how);
            }
            None if reaches_anything(&root.name) && !root.local => {
                self.opaque(format!("computed member of {}", root.name));
            }
            None => {}
        }
    }

    /// `{ a, b: c, [k]: d, ...rest } = root`: each static key as its member, anything else as
    /// opaque; `init` that is no such root is left to the other rules.
    fn destructure(
        &mut self,
        keys: &[(Option<String>, Option<&ObjectPattern<'_>>)],
        rest: bool,
        init: &Expression<'_>,
    ) {
        let Some(root) = self.root_of(init) else {
            return;
        };
        let global_object = GLOBAL_OBJECTS.contains(&root.name.as_str());
        if !(global_object || reaches_anything(&root.name) || root.name == "module") {
            return;
        }
        self.consume(init, Use::Destructured);
        self.destructure_root(&root, keys, rest);
    }

    fn destructure_root(&mut self, root: &Root, keys: &[PatternKey<'_, '_>], rest: bool) {
        let global_object = GLOBAL_OBJECTS.contains(&root.name.as_str());
        for (k, nested) in keys {
            match k {
                None if !root.local => self.opaque(format!("computed member of {}", root.name)),
                None => {}
                Some(k) if global_object => {
                    let inner = Root {
                        name: k.clone(),
                        local: root.local,
                    };
                    match nested {
                        Some(p) if reaches_anything(k) => {
                            let (keys, rest) = object_pattern_keys(p);
                            self.destructure_root(&inner, &keys, rest);
                        }
                        _ if !root.local => self.global_value(k),
                        _ => {}
                    }
                }
                Some(k) => self.member(root, k, Some(Use::Destructured)),
            }
        }
        if rest && !root.local {
            if let Some(label) = value_label(&root.name) {
                self.opaque(label);
            }
        }
    }
}

/// A key of a destructuring pattern: its static name (`None` when computed), and the object
/// pattern it destructures further, if any (`{ Bun: { spawn } } = globalThis`).
type PatternKey<'b, 'a> = (Option<String>, Option<&'b ObjectPattern<'a>>);

/// Keys of an object pattern, and whether it has a rest element.
fn object_pattern_keys<'b, 'a>(p: &'b ObjectPattern<'a>) -> (Vec<PatternKey<'b, 'a>>, bool) {
    let keys = p
        .properties
        .iter()
        .map(|prop| {
            let k = static_key(&prop.key).map(|k| k.into_owned());
            let nested = match &prop.value {
                BindingPattern::ObjectPattern(o) => Some(&**o),
                BindingPattern::AssignmentPattern(a) => match &a.left {
                    BindingPattern::ObjectPattern(o) => Some(&**o),
                    _ => None,
                },
                _ => None,
            };
            (k, nested)
        })
        .collect();
    (keys, p.rest.is_some())
}

impl<'a> Visit<'a> for ApiVisitor<'_> {
    fn visit_program(&mut self, it: &Program<'a>) {
        let mut names = HashSet::new();
        body_names(&it.body, &mut names);
        self.with_scope(names, |v| walk::walk_program(v, it));
    }

    fn visit_function(&mut self, it: &Function<'a>, flags: ScopeFlags) {
        let mut names = HashSet::new();
        params_names(&it.params, &mut names);
        if it.r#type == FunctionType::FunctionExpression {
            if let Some(id) = &it.id {
                names.insert(id.name.to_string());
            }
        }
        if let Some(body) = &it.body {
            body_names(&body.statements, &mut names);
        }
        self.with_scope(names, |v| walk::walk_function(v, it, flags));
    }

    fn visit_arrow_function_expression(&mut self, it: &ArrowFunctionExpression<'a>) {
        let mut names = HashSet::new();
        params_names(&it.params, &mut names);
        if let ArrowFunctionBody::FunctionBody(body) = &it.body {
            body_names(&body.statements, &mut names);
        }
        self.with_scope(names, |v| walk::walk_arrow_function_expression(v, it));
    }

    fn visit_block_statement(&mut self, it: &BlockStatement<'a>) {
        let mut names = HashSet::new();
        lexical_names(&it.body, &mut names);
        self.with_scope(names, |v| walk::walk_block_statement(v, it));
    }

    fn visit_static_block(&mut self, it: &StaticBlock<'a>) {
        let mut names = HashSet::new();
        body_names(&it.body, &mut names);
        self.with_scope(names, |v| walk::walk_static_block(v, it));
    }

    fn visit_catch_clause(&mut self, it: &CatchClause<'a>) {
        let mut names = HashSet::new();
        if let Some(p) = &it.param {
            pattern_names(&p.pattern, &mut names);
        }
        self.with_scope(names, |v| walk::walk_catch_clause(v, it));
    }

    fn visit_for_statement(&mut self, it: &ForStatement<'a>) {
        let mut names = HashSet::new();
        if let Some(ForStatementInit::VariableDeclaration(d)) = &it.init {
            for d in &d.declarations {
                pattern_names(&d.id, &mut names);
            }
        }
        if let Some(test) = &it.test {
            self.consume(test, Use::Test);
        }
        self.with_scope(names, |v| walk::walk_for_statement(v, it));
    }

    fn visit_for_in_statement(&mut self, it: &ForInStatement<'a>) {
        let mut names = HashSet::new();
        if let ForStatementLeft::VariableDeclaration(d) = &it.left {
            for d in &d.declarations {
                pattern_names(&d.id, &mut names);
            }
        }
        self.with_scope(names, |v| walk::walk_for_in_statement(v, it));
    }

    fn visit_for_of_statement(&mut self, it: &ForOfStatement<'a>) {
        let mut names = HashSet::new();
        if let ForStatementLeft::VariableDeclaration(d) = &it.left {
            for d in &d.declarations {
                pattern_names(&d.id, &mut names);
            }
        }
        self.with_scope(names, |v| walk::walk_for_of_statement(v, it));
    }

    fn visit_switch_statement(&mut self, it: &SwitchStatement<'a>) {
        let mut names = HashSet::new();
        for case in &it.cases {
            lexical_names(&case.consequent, &mut names);
        }
        self.with_scope(names, |v| walk::walk_switch_statement(v, it));
    }

    fn visit_class(&mut self, it: &Class<'a>) {
        let mut names = HashSet::new();
        if let Some(id) = &it.id {
            names.insert(id.name.to_string());
        }
        self.with_scope(names, |v| walk::walk_class(v, it));
    }

    fn visit_expression(&mut self, it: &Expression<'a>) {
        if self.use_of(it.span()).is_none() {
            if let Some(root) = self.root_of(it) {
                if !root.local {
                    if let Some(label) = value_label(&root.name) {
                        self.opaque(label);
                        self.consume(it, Use::Object);
                    }
                }
            }
        }
        walk::walk_expression(self, it);
    }

    fn visit_static_member_expression(&mut self, it: &StaticMemberExpression<'a>) {
        self.visit_member(&it.object, Some(it.property.name.as_str()), it.span);
        walk::walk_static_member_expression(self, it);
    }

    fn visit_computed_member_expression(&mut self, it: &ComputedMemberExpression<'a>) {
        let prop = literal_expr(&it.expression).map(str::to_string);
        self.visit_member(&it.object, prop.as_deref(), it.span);
        walk::walk_computed_member_expression(self, it);
    }

    fn visit_call_expression(&mut self, it: &CallExpression<'a>) {
        self.consume(&it.callee, Use::Callee);
        if let Some(root) = self.root_of(&it.callee) {
            match root.name.as_str() {
                "require" => {
                    if let Some(spec) = literal_arg(&it.arguments) {
                        self.facts.requires.insert(spec.to_string());
                    } else {
                        self.facts.computed_dynamic_import = true;
                    }
                }
                "fetch" => {
                    self.facts.network.insert("fetch".into());
                }
                "eval" => {
                    self.facts.process.insert("eval".into());
                    // `eval(x)` and `(eval)(x)` are direct; anything else (`eval?.(x)` too)
                    // evaluates in the global scope.
                    let direct = !it.optional
                        && matches!(it.callee.without_parentheses(), Expression::Identifier(_));
                    if !direct && !root.local {
                        self.opaque("indirect eval");
                    }
                }
                "Function" => {
                    self.facts.process.insert("eval".into());
                    if !root.local {
                        self.opaque("Function constructor");
                    }
                }
                n @ ("setTimeout" | "setInterval")
                    if !root.local
                        && it
                            .arguments
                            .first()
                            .and_then(|a| a.as_expression())
                            .is_some_and(is_code_string) =>
                {
                    self.opaque(format!("{n} with a code string"));
                }
                _ => {}
            }
        }
        if let Some((object, prop, span)) = literal_member(&it.callee) {
            let literal = literal_arg(&it.arguments).map(str::to_string);
            let import_meta = matches!(strip(object), Expression::ImportMeta(_));
            let root = self.root_of(object);
            if prop == "getBuiltinModule" && root.as_ref().is_some_and(|r| r.name == "process") {
                // Loads a built-in by name: a literal one classifies like its import.
                self.uses.insert(key(span), Use::Handled);
                match literal {
                    Some(spec) => {
                        self.facts.requires.insert(spec);
                    }
                    None => self.opaque("process.getBuiltinModule"),
                }
            } else if prop == "require" && import_meta {
                // Bun's `import.meta.require("x")` is `require("x")`; a computed one is opaque.
                self.uses.insert(key(span), Use::Handled);
                match literal {
                    Some(spec) => {
                        self.facts.requires.insert(spec);
                    }
                    None => {
                        self.facts.computed_dynamic_import = true;
                        self.opaque("import.meta.require");
                    }
                }
            } else if prop == "constructor" {
                // `f.constructor("code")`: only the Function constructors are called bare.
                self.opaque("Function constructor");
            }
        }
        walk::walk_call_expression(self, it);
    }

    fn visit_new_expression(&mut self, it: &NewExpression<'a>) {
        self.consume(&it.callee, Use::Callee);
        if let Some(root) = self.root_of(&it.callee) {
            match root.name.as_str() {
                n @ ("WebSocket" | "XMLHttpRequest" | "EventSource") => {
                    self.facts.network.insert(n.to_string());
                }
                "Worker" => {
                    self.facts.process.insert("Worker".into());
                }
                "Function" => {
                    self.facts.process.insert("eval".into());
                    if !root.local {
                        self.opaque("Function constructor");
                    }
                }
                _ => {}
            }
        }
        walk::walk_new_expression(self, it);
    }

    fn visit_unary_expression(&mut self, it: &UnaryExpression<'a>) {
        if matches!(
            it.operator,
            UnaryOperator::Typeof | UnaryOperator::LogicalNot | UnaryOperator::Void
        ) {
            self.consume(&it.argument, Use::Test);
        }
        walk::walk_unary_expression(self, it);
    }

    fn visit_binary_expression(&mut self, it: &BinaryExpression<'a>) {
        let op = it.operator;
        if op.is_equality() || op.is_compare() || op.is_relational() {
            self.consume(&it.left, Use::Test);
            self.consume(&it.right, Use::Test);
        }
        walk::walk_binary_expression(self, it);
    }

    fn visit_logical_expression(&mut self, it: &LogicalExpression<'a>) {
        // `globalThis.Bun && …` yields the global only when it is missing.
        if it.operator.is_and() {
            self.consume(&it.left, Use::Test);
        }
        walk::walk_logical_expression(self, it);
    }

    fn visit_conditional_expression(&mut self, it: &ConditionalExpression<'a>) {
        self.consume(&it.test, Use::Test);
        walk::walk_conditional_expression(self, it);
    }

    fn visit_if_statement(&mut self, it: &IfStatement<'a>) {
        self.consume(&it.test, Use::Test);
        walk::walk_if_statement(self, it);
    }

    fn visit_while_statement(&mut self, it: &WhileStatement<'a>) {
        self.consume(&it.test, Use::Test);
        walk::walk_while_statement(self, it);
    }

    fn visit_do_while_statement(&mut self, it: &DoWhileStatement<'a>) {
        self.consume(&it.test, Use::Test);
        walk::walk_do_while_statement(self, it);
    }

    fn visit_variable_declarator(&mut self, it: &VariableDeclarator<'a>) {
        if let (BindingPattern::ObjectPattern(p), Some(init)) = (&it.id, &it.init) {
            let (keys, rest) = object_pattern_keys(p);
            self.destructure(&keys, rest, init);
        }
        walk::walk_variable_declarator(self, it);
    }

    fn visit_assignment_pattern(&mut self, it: &AssignmentPattern<'a>) {
        if let BindingPattern::ObjectPattern(p) = &it.left {
            let (keys, rest) = object_pattern_keys(p);
            self.destructure(&keys, rest, &it.right);
        }
        walk::walk_assignment_pattern(self, it);
    }

    fn visit_formal_parameter(&mut self, it: &FormalParameter<'a>) {
        if let (BindingPattern::ObjectPattern(p), Some(init)) = (&it.pattern, &it.initializer) {
            let (keys, rest) = object_pattern_keys(p);
            self.destructure(&keys, rest, init);
        }
        walk::walk_formal_parameter(self, it);
    }

    fn visit_assignment_expression(&mut self, it: &AssignmentExpression<'a>) {
        if let AssignmentTarget::ObjectAssignmentTarget(t) = &it.left {
            let keys: Vec<PatternKey<'_, '_>> = t
                .properties
                .iter()
                .map(|p| match p {
                    AssignmentTargetProperty::AssignmentTargetPropertyIdentifier(i) => {
                        (Some(i.binding.name.to_string()), None)
                    }
                    AssignmentTargetProperty::AssignmentTargetPropertyProperty(p) => {
                        (static_key(&p.name).map(|k| k.into_owned()), None)
                    }
                })
                .collect();
            self.destructure(&keys, t.rest.is_some(), &it.right);
        }
        walk::walk_assignment_expression(self, it);
    }

    fn visit_binding_property(&mut self, it: &BindingProperty<'a>) {
        // `({ $ }) => …`: the plugin input's Bun shell.
        if static_key(&it.key).is_some_and(|k| k == "$") {
            self.shell();
        }
        walk::walk_binding_property(self, it);
    }

    fn visit_assignment_target_property_identifier(
        &mut self,
        it: &AssignmentTargetPropertyIdentifier<'a>,
    ) {
        if it.binding.name == "$" {
            self.shell();
        }
        walk::walk_assignment_target_property_identifier(self, it);
    }

    fn visit_assignment_target_property_property(
        &mut self,
        it: &AssignmentTargetPropertyProperty<'a>,
    ) {
        if static_key(&it.name).is_some_and(|k| k == "$") {
            self.shell();
        }
        walk::walk_assignment_target_property_property(self, it);
    }

    fn visit_import_declaration(&mut self, it: &ImportDeclaration<'a>) {
        let source = it.source.value.as_str();
        if it.import_kind.is_value() {
            for spec in it.specifiers.iter().flatten() {
                match spec {
                    ImportDeclarationSpecifier::ImportSpecifier(s) if s.import_kind.is_value() => {
                        let imported = s.imported.name();
                        if matches!(source, "module" | "node:module") && imported == "createRequire"
                        {
                            self.opaque("createRequire");
                        }
                        if let Some(ns) = namespace_of(source) {
                            if imported == "default" {
                                self.aliases.insert(s.local.name.to_string(), ns);
                            } else {
                                let root = Root {
                                    name: ns.into(),
                                    local: false,
                                };
                                self.member(&root, &imported, Some(Use::Destructured));
                            }
                        }
                    }
                    ImportDeclarationSpecifier::ImportSpecifier(_) => {}
                    ImportDeclarationSpecifier::ImportDefaultSpecifier(s) => {
                        if let Some(ns) = namespace_of(source) {
                            self.aliases.insert(s.local.name.to_string(), ns);
                        }
                    }
                    ImportDeclarationSpecifier::ImportNamespaceSpecifier(s) => {
                        if let Some(ns) = namespace_of(source) {
                            self.aliases.insert(s.local.name.to_string(), ns);
                        }
                    }
                }
            }
        }
        walk::walk_import_declaration(self, it);
    }

    fn visit_export_from_declaration(&mut self, it: &ExportFromDeclaration<'a>) {
        if let (Some(ns), true) = (namespace_of(&it.source.value), it.export_kind.is_value()) {
            let root = Root {
                name: ns.into(),
                local: false,
            };
            for s in &it.specifiers {
                if s.export_kind.is_value() {
                    let name = s.local.name();
                    if name == "default" {
                        self.opaque(format!("{ns} used as a value"));
                    } else {
                        self.member(&root, &name, Some(Use::Destructured));
                    }
                }
            }
        }
        walk::walk_export_from_declaration(self, it);
    }

    fn visit_export_all_declaration(&mut self, it: &ExportAllDeclaration<'a>) {
        // Re-exporting the whole namespace hands it to whoever imports this file.
        if let (Some(ns), true) = (namespace_of(&it.source.value), it.export_kind.is_value()) {
            self.opaque(format!("{ns} used as a value"));
        }
        walk::walk_export_all_declaration(self, it);
    }

    fn visit_export_named_declaration(&mut self, it: &ExportNamedDeclaration<'a>) {
        for s in &it.specifiers {
            if let ModuleExportName::IdentifierReference(id) = &s.local {
                if let Some(ns) = self.aliases.get(id.name.as_str()) {
                    let label = format!("{ns} used as a value");
                    self.opaque(label);
                }
            }
        }
        walk::walk_export_named_declaration(self, it);
    }

    fn visit_ts_import_equals_declaration(&mut self, it: &TSImportEqualsDeclaration<'a>) {
        if it.import_kind.is_value() {
            match &it.module_reference {
                // `import cp = require("child_process")` is `const cp = require(…)`.
                TSModuleReference::ExternalModuleReference(r) => {
                    let spec = r.expression.value.as_str();
                    if !self.facts.static_imports.contains(spec) {
                        self.facts.requires.insert(spec.to_string());
                    }
                    if let Some(ns) = namespace_of(spec) {
                        self.aliases.insert(it.id.name.to_string(), ns);
                    }
                }
                // `import run = Bun.spawn` is `const run = Bun.spawn`.
                TSModuleReference::QualifiedName(q) => {
                    // Deeper chains (`a.b.c`) are not resolved here.
                    if let TSTypeName::IdentifierReference(left) = &q.left {
                        let root = self.named(left.name.as_str());
                        if !GLOBAL_OBJECTS.contains(&root.name.as_str()) {
                            self.member(&root, &q.right.name, None);
                        } else if !root.local {
                            self.global_value(&q.right.name);
                        }
                    }
                }
                TSModuleReference::IdentifierReference(id) => {
                    let root = self.named(id.name.as_str());
                    if !root.local {
                        if let Some(label) = value_label(&root.name) {
                            self.opaque(label);
                        }
                    }
                }
            }
        }
        walk::walk_ts_import_equals_declaration(self, it);
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
        // `import("bun")` not awaited into a member or a destructuring: the namespace escapes.
        if let Some(ns) = literal_expr(&it.source).and_then(namespace_of) {
            if self.use_of(it.span).is_none() {
                self.opaque(format!("{ns} used as a value"));
            }
        }
        walk::walk_import_expression(self, it);
    }

    fn visit_tagged_template_expression(&mut self, it: &TaggedTemplateExpression<'a>) {
        // `$\`cmd\`` is Bun's shell: the plugin input's `$` (`input.$`, `$.cwd(d)`) or Bun's.
        if is_shell_tag(&it.tag) {
            self.shell();
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
    fn the_default_exports_keys_tell_the_plugin_api_generation() {
        let shape = |src: &str| facts(src).default_shape;
        let v2 = shape("import { Plugin } from '@opencode/plugin'\nexport default Plugin.define({ id: 'a.b', async setup(ctx) {} })").unwrap();
        assert_eq!(
            (v2.id.as_deref(), v2.setup, v2.server),
            (Some("a.b"), true, false)
        );
        let effect = shape("export default define({ id: 'e', effect: (ctx) => ctx })").unwrap();
        assert!(effect.effect && !effect.setup);
        let both =
            shape("const p = { id: 'x', server: async () => ({}), setup() {} }\nexport default p")
                .unwrap();
        assert!(both.server && both.setup);
        let v1 = shape("export default { id: 'x', server: async () => ({}) }").unwrap();
        assert!(v1.server && !v1.setup && !v1.effect);
        // A factory, or a value the reader cannot see, says nothing (V1's reading).
        assert_eq!(shape("export default async () => ({})"), None);
        assert_eq!(shape("import p from './p'\nexport default p"), None);
        // Not any call: `tool({...})` is no plugin definition.
        assert_eq!(shape("export default tool({ id: 'x', setup() {} })"), None);
    }

    #[test]
    fn a_file_nested_as_deep_as_it_is_long_is_read_or_refused_never_overflows() {
        // Found by berth-fuzz: 5,000 nested brackets, or 50,000 chained `+`, overflowed the
        // scanning thread's stack and aborted Berth.
        // 200,000 terms: a thread of its own; 60,000 (just under READER_BYTES): the kept reader.
        for terms in [200_000, 60_000] {
            let chain = format!("export default {}\n", vec!["1"; terms].join("+"));
            let f = facts(&chain);
            assert_eq!(f.exports, ["default"], "{terms}: {:?}", f.syntax_errors);
            assert!(f.syntax_errors.is_empty());
        }
        let nested = |d: usize| format!("export default {}{}\n", "[".repeat(d), "]".repeat(d));
        let f = facts(&nested(1_500));
        assert_eq!(f.exports, ["default"], "{:?}", f.syntax_errors);
        let f = facts(&nested(5_000));
        assert!(
            f.syntax_errors[0].contains("5000 levels"),
            "{:?}",
            f.syntax_errors
        );
        assert!(
            f.opaque.contains("a file Berth could not read"),
            "{:?}",
            f.opaque
        );
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

    /// `source` (TypeScript) yields exactly `opaque` and `process`.
    #[track_caller]
    fn check(source: &str, opaque: &[&str], process: &[&str]) {
        let f = facts(source);
        let got = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>();
        let sorted = |v: &[&str]| {
            let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
            v.sort();
            v
        };
        assert_eq!(got(&f.opaque), sorted(opaque), "opaque of {source}");
        assert_eq!(got(&f.process), sorted(process), "process of {source}");
        assert!(
            f.syntax_errors.is_empty(),
            "{source}: {:?}",
            f.syntax_errors
        );
    }

    #[test]
    fn evasions_that_ran_code_without_a_question_are_named() {
        // The evasions as reported.
        check(
            "process.getBuiltinModule('node:child_process').spawnSync('ls')",
            &[],
            &["node:child_process"],
        );
        check(
            "import.meta.require('child_process')",
            &[],
            &["child_process"],
        );
        check(
            "import { createRequire } from 'node:module'; const r = createRequire(import.meta.url); r('x')",
            &["createRequire", "node:module"],
            &[],
        );
        check("globalThis.Bun.spawnSync(['ls'])", &[], &["Bun.spawnSync"]);
        check(
            "Bun['spawn' + 'Sync'](['ls'])",
            &["computed member of Bun"],
            &[],
        );
        check("(0, eval)(code)", &["indirect eval"], &["eval"]);
        check("eval?.(code)", &["indirect eval"], &["eval"]);
        check(
            "import vm from 'node:vm'; vm.runInThisContext(code)",
            &["node:vm"],
            &[],
        );
        check(
            "import cp = require('child_process'); cp.execSync('ls')",
            &[],
            &["child_process"],
        );
        check(
            "export default async ({ $ }) => { await $`ls` }",
            &[],
            &["$ (Bun shell)"],
        );
        check(
            "export default async (input) => { await input.$`ls` }",
            &[],
            &["$ (Bun shell)"],
        );
        check(
            "export default async (ctx) => { await ctx.$.cwd('/')`ls` }",
            &[],
            &["$ (Bun shell)"],
        );
        check(
            "import { file } from 'bun'; import { spawnSync } from 'bun'; spawnSync(['ls'])",
            &[],
            &["Bun.spawnSync"],
        );
    }

    #[test]
    fn kin_of_the_evasions_are_named() {
        // Computed members of the objects that reach everything.
        check("process[name]", &["computed member of process"], &[]);
        check("globalThis[name]", &["computed member of globalThis"], &[]);
        check("global[name]()", &["computed member of global"], &[]);
        check("self[name]", &["computed member of self"], &[]);
        check("window[name]", &["computed member of window"], &[]);
        check("Deno[name]", &["computed member of Deno"], &[]);
        check("globalThis['Bun'][name]", &["computed member of Bun"], &[]);
        check(
            "declare const Bun: any; Bun[name]",
            &["computed member of Bun"],
            &[],
        );
        // The same objects escaping as values.
        check("Reflect.get(Bun, 'spawn')", &["Bun used as a value"], &[]);
        check("const B = Bun", &["Bun used as a value"], &[]);
        check("f(process)", &["process used as a value"], &[]);
        check("const o = { ...Bun }", &["Bun used as a value"], &[]);
        check(
            "const g = globalThis; g.Bun",
            &["globalThis used as a value"],
            &[],
        );
        check("export default Deno", &["Deno used as a value"], &[]);
        check(
            "const { ...all } = process",
            &["process used as a value"],
            &[],
        );
        check(
            "const { Bun: B } = globalThis",
            &["Bun used as a value"],
            &[],
        );
        check("const { [k]: f } = Bun", &["computed member of Bun"], &[]);
        // Destructuring with static keys classifies each key as its member.
        check("const { spawn } = Bun; spawn(['ls'])", &[], &["Bun.spawn"]);
        check(
            "const { spawnSync } = globalThis.Bun",
            &[],
            &["Bun.spawnSync"],
        );
        check("const { Bun: { spawn } } = globalThis", &[], &["Bun.spawn"]);
        check("({ spawn } = Bun)", &[], &["Bun.spawn"]);
        check("function f({ kill } = process) {}", &[], &["process.kill"]);
        // Member chains through the global object.
        check("global.process.kill(1)", &[], &["process.kill"]);
        check("window.self.Bun.spawn(['ls'])", &[], &["Bun.spawn"]);
        check("globalThis.eval(code)", &["indirect eval"], &["eval"]);
        check(
            "new globalThis.Function('return 1')",
            &["Function constructor"],
            &["eval"],
        );
        // Loading by name.
        check(
            "process.getBuiltinModule(name)",
            &["process.getBuiltinModule"],
            &[],
        );
        check(
            "const { getBuiltinModule } = process",
            &["process.getBuiltinModule"],
            &[],
        );
        check(
            "import { getBuiltinModule } from 'node:process'",
            &["process.getBuiltinModule"],
            &[],
        );
        check(
            "import p from 'node:process'; p[k]",
            &["computed member of process"],
            &[],
        );
        check(
            "process.mainModule.require('x')",
            &["process.mainModule"],
            &[],
        );
        check("module.require('child_process')", &["module.require"], &[]);
        check(
            "module.constructor._load('x')",
            &["module.constructor"],
            &[],
        );
        check("require.cache[k] = m", &["require.cache"], &[]);
        check("require.main.require('x')", &["require.main"], &[]);
        check(
            "const r = require; r('x')",
            &["require used as a value"],
            &[],
        );
        check("require.call(null, 'x')", &["require used as a value"], &[]);
        check("import.meta.require(name)", &["import.meta.require"], &[]);
        check(
            "const r = import.meta.require",
            &["import.meta.require"],
            &[],
        );
        check("import.meta[k]", &["computed member of import.meta"], &[]);
        check(
            "const m = require('module'); m.createRequire(u)",
            &["createRequire", "node:module"],
            &[],
        );
        check("const vm = require('vm')", &["node:vm"], &[]);
        check("process.getBuiltinModule('vm')", &["node:vm"], &[]);
        // Code from strings.
        check("eval(code)", &[], &["eval"]);
        check("const e = eval", &["eval used as a value"], &[]);
        check("eval.call(null, code)", &["indirect eval"], &["eval"]);
        check(
            "new Function('return 1')",
            &["Function constructor"],
            &["eval"],
        );
        check(
            "Function('return 1')()",
            &["Function constructor"],
            &["eval"],
        );
        check(
            "class X extends Function {}",
            &["Function constructor"],
            &[],
        );
        check(
            "(() => {}).constructor('return this')()",
            &["Function constructor"],
            &[],
        );
        check(
            "x.constructor.constructor('code')",
            &["Function constructor"],
            &[],
        );
        check(
            "setTimeout('run()', 10)",
            &["setTimeout with a code string"],
            &[],
        );
        check(
            "setInterval(`tick(${n})`, 10)",
            &["setInterval with a code string"],
            &[],
        );
        // The `bun` module is the `Bun` namespace.
        check(
            "import * as B from 'bun'; B.spawn(['ls'])",
            &[],
            &["Bun.spawn"],
        );
        check(
            "import B from 'bun'; const x = B",
            &["Bun used as a value"],
            &[],
        );
        check(
            "import B from 'bun'; B[k]",
            &["computed member of Bun"],
            &[],
        );
        check(
            "import * as B from 'bun'; export { B }",
            &["Bun used as a value"],
            &[],
        );
        check("export { spawn } from 'bun'", &[], &["Bun.spawn"]);
        check("export * from 'bun'", &["Bun used as a value"], &[]);
        check(
            "import { $ } from 'bun'; await $`ls`",
            &[],
            &["$ (Bun shell)", "Bun.$"],
        );
        check("const { spawn } = require('bun')", &[], &["Bun.spawn"]);
        check("const { spawn } = await import('bun')", &[], &["Bun.spawn"]);
        check(
            "import('bun').then((b) => b.spawn(['ls']))",
            &["Bun used as a value"],
            &[],
        );
        check(
            "import B = require('bun'); B.spawnSync(['ls'])",
            &[],
            &["Bun.spawnSync"],
        );
        check("import run = Bun.spawn", &[], &["Bun.spawn"]);
        // The plugin input's shell, however it is reached.
        check("const { $ } = input; await $`ls`", &[], &["$ (Bun shell)"]);
        check("const sh = input['$']", &[], &["$ (Bun shell)"]);
        check("let s; ({ $: s } = input)", &[], &["$ (Bun shell)"]);
        check("const hasShell = typeof input.$ === 'function'", &[], &[]);
    }

    #[test]
    fn ordinary_code_is_not_opaque() {
        for source in [
            "const home = process.env.HOME; process.cwd(); process.on('exit', () => {})",
            "const { env, argv } = process; process.exit(0)",
            "const f = Bun.file(p); await Bun.write(p, 'x')",
            "if (typeof Bun !== 'undefined') {} const isNode = typeof process === 'object'",
            "const isBun = 'Bun' in globalThis; const b = !!globalThis.Bun",
            "if (globalThis.Bun) {} const v = globalThis.process?.versions?.bun",
            "const hasBun = globalThis.Bun !== undefined && typeof window === 'undefined'",
            "const r = await fetch(url); globalThis.foo = 1",
            "class A { m() { const self = this; self[key] = 1; f(self) } }",
            "function f(process) { return process[key] } const g = (Bun) => Bun[k]",
            "if (x instanceof Function) {} Function.prototype.toString.call(x)",
            "if (require.main === module) {} const p = require.resolve('x'); module.exports = {}",
            "setTimeout(() => {}, 10); setInterval(tick, 10)",
            "const u = new URL('./x', import.meta.url); const d = import.meta.dir",
            "import { tool } from '@opencode-ai/plugin'; export default tool({ description: 'x', args: {}, execute: async () => 'x' })",
            "export const P = async ({ client, directory }) => ({ event: async ({ event }) => {} })",
            "const module = await import(x); module.constructor; const r = require(name)",
        ] {
            let f = facts(source);
            assert!(f.opaque.is_empty(), "{source}: {:?}", f.opaque);
            assert!(f.syntax_errors.is_empty(), "{source}: {:?}", f.syntax_errors);
        }
    }

    #[test]
    fn reaching_an_api_through_the_global_object_classifies_it_as_the_api() {
        let f = facts(
            "global.process.env.HOME; self.fetch(u); window.fetch(u); globalThis.Bun.file(p)",
        );
        assert!(f.environment.contains("process.env"));
        assert!(f.network.contains("fetch"));
        assert!(f.filesystem.contains("Bun.file"));
        let f = facts("import { file, serve } from 'bun'; import { env } from 'node:process'");
        assert!(f.filesystem.contains("Bun.file") && f.bun_apis.contains("Bun.file"));
        assert!(f.network.contains("Bun.serve"));
        assert!(f.environment.contains("process.env"));
        let f = facts("const { fetch: get } = globalThis; get(u)");
        assert!(f.network.contains("fetch"));
        assert!(f.opaque.is_empty());
    }

    #[test]
    fn names_loaded_by_literal_are_recorded_as_requires() {
        let f = facts(
            "import.meta.require('a'); process.getBuiltinModule('node:fs'); import b = require('b');",
        );
        assert!(
            ["a", "node:fs", "b"]
                .iter()
                .all(|s| f.requires.contains(*s)),
            "{f:?}"
        );
        assert!(f.filesystem.contains("node:fs"));
        assert!(!f.computed_dynamic_import);
        assert!(facts("require(name)").computed_dynamic_import);
        assert!(facts("import.meta.require(name)").computed_dynamic_import);
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
