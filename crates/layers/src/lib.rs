//! The check that Berth's layering holds where Cargo cannot see it: inside one crate. Every
//! `crate::…` and `super::…` path of every file (in `use` trees, types, expressions, patterns,
//! anywhere — parsed with `syn`, not matched line by line) is an edge from the top-level module
//! it is written in to the top-level module it names; a cycle among those edges is a defect.
//! Names the crate root re-exports (`pub use x::Y;` in `lib.rs`) count as edges to `x`.
//!
//! Owns: reading a crate's sources into that graph and finding its cycles. Must not: depend on
//! any Berth crate (it reads them as text).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// Top-level module → the top-level modules its paths name.
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// The module graph of the crate whose sources are in `src` (with `lib.rs` or `main.rs`).
pub fn module_graph(src: &Path) -> Result<Graph, String> {
    let root_file = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{} has no lib.rs or main.rs", src.display()))?;
    let root = parse(&root_file)?;
    let modules: BTreeSet<String> = root
        .items
        .iter()
        .filter_map(|i| match i {
            syn::Item::Mod(m) => Some(m.ident.to_string()),
            _ => None,
        })
        .collect();
    let reexports = root_reexports(&root, &modules);
    let mut graph = Graph::new();
    for module in &modules {
        let mut edges = BTreeSet::new();
        for file in files_of(src, module) {
            let (tree, depth) = (parse(&file.0)?, file.1);
            let mut v = Paths {
                depth,
                modules: &modules,
                reexports: &reexports,
                edges: &mut edges,
            };
            v.visit_file(&tree);
        }
        edges.remove(module);
        graph.insert(module.clone(), edges);
    }
    Ok(graph)
}

/// Every cycle of `graph` as the modules on it, each cycle once (starting at its least name).
pub fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    let mut found = BTreeSet::new();
    for start in graph.keys() {
        let mut path = vec![start.clone()];
        walk(graph, start, &mut path, &mut found);
    }
    found.into_iter().collect()
}

fn walk(graph: &Graph, start: &str, path: &mut Vec<String>, found: &mut BTreeSet<Vec<String>>) {
    let last = path.last().cloned().unwrap_or_default();
    for next in graph.get(&last).into_iter().flatten() {
        if next == start {
            // Report each cycle once: from its least module.
            if path.iter().all(|m| m.as_str() >= start) {
                found.insert(path.clone());
            }
        } else if !path.contains(next) && next.as_str() > start {
            path.push(next.clone());
            walk(graph, start, path, found);
            path.pop();
        }
    }
}

/// Files that declare `impl <ty>` blocks, with how many lines each file has.
pub fn impl_sites(src: &Path, ty: &str) -> Result<Vec<(PathBuf, usize)>, String> {
    let mut out = Vec::new();
    for file in rust_files(src) {
        let tree = parse(&file)?;
        let mut v = Impls { ty, found: false };
        v.visit_file(&tree);
        if v.found {
            let lines = std::fs::read_to_string(&file)
                .map_err(|e| e.to_string())?
                .lines()
                .count();
            out.push((file, lines));
        }
    }
    Ok(out)
}

fn parse(file: &Path) -> Result<syn::File, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    syn::parse_file(&text).map_err(|e| format!("{}: {e}", file.display()))
}

/// `use m::…::Name;` (and groups, renames) at the crate root: `Name` → `m`.
fn root_reexports(root: &syn::File, modules: &BTreeSet<String>) -> BTreeMap<String, String> {
    fn leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                leaves(&p.tree, prefix, out);
                prefix.pop();
            }
            syn::UseTree::Name(n) => out.push((prefix.clone(), n.ident.to_string())),
            syn::UseTree::Rename(r) => out.push((prefix.clone(), r.rename.to_string())),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| leaves(t, prefix, out)),
            syn::UseTree::Glob(_) => {}
        }
    }
    let mut found = Vec::new();
    for item in &root.items {
        if let syn::Item::Use(u) = item {
            leaves(&u.tree, &mut Vec::new(), &mut found);
        }
    }
    found
        .into_iter()
        .filter_map(|(prefix, name)| {
            let first = prefix.iter().find(|s| *s != "crate" && *s != "self")?;
            modules.contains(first).then(|| (name, first.clone()))
        })
        .collect()
}

/// The files of top-level module `name`, each with its nesting depth (1 for `src/name.rs`).
fn files_of(src: &Path, name: &str) -> Vec<(PathBuf, usize)> {
    let mut out = Vec::new();
    let file = src.join(format!("{name}.rs"));
    if file.is_file() {
        out.push((file, 1));
    }
    let dir = src.join(name);
    if dir.is_dir() {
        let mut stack = vec![(dir, 2usize)];
        while let Some((d, depth)) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push((p, depth + 1));
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let is_mod = p.file_name().is_some_and(|f| f == "mod.rs");
                    out.push((p, if is_mod { depth - 1 } else { depth }));
                }
            }
        }
    }
    out
}

fn rust_files(src: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Collects the top-level modules named by the paths of one file.
struct Paths<'a> {
    /// How deep the code being visited sits below the crate root.
    depth: usize,
    modules: &'a BTreeSet<String>,
    reexports: &'a BTreeMap<String, String>,
    edges: &'a mut BTreeSet<String>,
}

impl Paths<'_> {
    /// `segments` of one path, as written: an edge if it starts at the crate root.
    fn path(&mut self, segments: &[String]) {
        let supers = segments.iter().take_while(|s| *s == "super").count();
        let rest: &[String] = if segments.first().is_some_and(|s| s == "crate") {
            &segments[1..]
        } else if supers > 0 && supers >= self.depth {
            &segments[supers..]
        } else {
            return;
        };
        let Some(first) = rest.first() else { return };
        if self.modules.contains(first) {
            self.edges.insert(first.clone());
        } else if let Some(m) = self.reexports.get(first) {
            self.edges.insert(m.clone());
        }
    }

    fn use_tree(&mut self, tree: &syn::UseTree, prefix: &mut Vec<String>) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(&p.tree, prefix);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                let whole = prefix.clone();
                self.path(&whole);
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                let whole = prefix.clone();
                self.path(&whole);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => {
                let whole = prefix.clone();
                self.path(&whole);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(t, prefix);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.path(&segments);
        syn::visit::visit_path(self, p);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&u.tree, &mut Vec::new());
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.depth += 1;
        syn::visit::visit_item_mod(self, m);
        self.depth -= 1;
    }

    // Macro bodies are token streams: a path inside `format!(…)` or `json!(…)` is read too.
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}

impl Paths<'_> {
    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let mut run: Vec<String> = Vec::new();
        let mut joined = false;
        for tt in tokens {
            match tt {
                proc_macro2::TokenTree::Ident(i) => {
                    if !joined && !run.is_empty() {
                        self.path(&std::mem::take(&mut run));
                    }
                    run.push(i.to_string());
                    joined = false;
                }
                proc_macro2::TokenTree::Punct(p) if p.as_char() == ':' => joined = true,
                proc_macro2::TokenTree::Group(g) => {
                    self.path(&std::mem::take(&mut run));
                    self.tokens(g.stream());
                    joined = false;
                }
                _ => {
                    self.path(&std::mem::take(&mut run));
                    joined = false;
                }
            }
        }
        self.path(&run);
    }
}

struct Impls<'a> {
    ty: &'a str,
    found: bool,
}

impl<'ast> Visit<'ast> for Impls<'_> {
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if let syn::Type::Path(p) = &*i.self_ty {
            if p.path.segments.last().is_some_and(|s| s.ident == self.ty) && i.trait_.is_none() {
                self.found = true;
            }
        }
        syn::visit::visit_item_impl(self, i);
    }
}
