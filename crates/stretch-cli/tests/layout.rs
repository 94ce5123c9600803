//! The workspace's structural rules (ARCHITECTURE.md, "Invariants"),
//! checked on the source tree:
//! - `scheduler-rt` serves one model and knows nothing of multi-DNN
//!   serving: no `multi` module, no dependency on `multi-dnn`;
//! - no file of `multi-dnn/src/policy/` or `multi-dnn/src/core/` imports a
//!   paper's folder (`heimdall/`, `splash/`, `puzzle/`);
//! - no import circle crosses `multi-dnn`'s folders;
//! - one percentile rule: no quantile, percentile or median function is
//!   defined outside `graph-ir/src/stats.rs` (tests aside);
//! - `stretch-cli` only parses, calls the libraries and prints: no policy
//!   list and no sweep loop of its own, policy help from the registry;
//! - one engine trait in the workspace;
//! - no file of `multi-dnn/src/core/` imports an extension's folder;
//! - no import circle of more than two files inside any crate's folder;
//! - no function over 100 lines in the library crates (tests aside).

mod layout_rules;

use layout_rules::{imports, text};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn crates() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The `.rs` files under `dir`, but code flatc generates (`*_generated.rs`):
/// its shape is flatc's, not ours.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs")
            && !p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().ends_with("_generated.rs"))
        {
            out.push(p);
        }
    }
}

/// The text of `path` before its first `#[cfg(test)]` (unit tests may
/// import what the code may not).
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// The folders under `crate::` that `code` names (`crate::core::x` → `core`).
fn crate_folders(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if rest[name.len()..].starts_with("::") || rest[name.len()..].starts_with("::{") {
            out.insert(name);
        }
    }
    out
}

#[test]
fn scheduler_rt_knows_nothing_of_multi_dnn() {
    let root = crates().join("scheduler-rt");
    assert!(!root.join("src/multi").exists(), "scheduler-rt/src/multi exists");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(!manifest.contains("multi-dnn"), "scheduler-rt depends on multi-dnn");
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    for f in files {
        let code = std::fs::read_to_string(&f).unwrap();
        assert!(!code.contains("multi_dnn"), "{} names multi_dnn", f.display());
    }
}

#[test]
fn policies_import_no_paper() {
    let mut files = Vec::new();
    rust_files(&crates().join("multi-dnn/src/policy"), &mut files);
    assert!(files.len() >= 5, "policy/ has {} files", files.len());
    for f in files {
        let used = crate_folders(&code_of(&f));
        for paper in ["heimdall", "splash", "puzzle"] {
            assert!(!used.contains(paper), "{} imports {paper}/", f.display());
        }
    }
}

/// Folder-level import edges of multi-dnn (files at the crate root, such
/// as the registry that lists every folder's policies, are not folders).
fn folder_edges() -> BTreeMap<String, BTreeSet<String>> {
    let src = crates().join("multi-dnn/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let Some(folder) = rel.components().next().filter(|_| rel.components().count() > 1) else {
            continue;
        };
        let folder = folder.as_os_str().to_string_lossy().to_string();
        let targets = crate_folders(&code_of(&f));
        let entry = edges.entry(folder.clone()).or_default();
        for t in targets {
            if t != folder && src.join(&t).is_dir() {
                entry.insert(t);
            }
        }
    }
    edges
}

fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|s| s == n) {
            let mut c = stack[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        stack.push(n.to_string());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges.keys().find_map(|n| visit(n, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_import_circle_crosses_folders() {
    let edges = folder_edges();
    assert!(edges.contains_key("core") && edges.contains_key("policy"), "{edges:?}");
    assert_eq!(find_cycle(&edges), None, "folder imports: {edges:?}");
    let mut circular = edges.clone();
    circular.entry("core".into()).or_default().insert("heimdall".into());
    circular.entry("heimdall".into()).or_default().insert("core".into());
    assert!(
        find_cycle(&circular).is_some(),
        "the cycle finder misses core <-> heimdall"
    );
}

#[test]
fn one_percentile_rule() {
    let mut files = Vec::new();
    for c in [
        "graph-ir",
        "predictor",
        "branching",
        "training",
        "scheduler-rt",
        "multi-dnn",
        "stretch-cli",
    ] {
        rust_files(&crates().join(c).join("src"), &mut files);
        rust_files(&crates().join(c).join("examples"), &mut files);
    }
    let home = crates().join("graph-ir/src/stats.rs");
    let mut found = Vec::new();
    for f in files.iter().filter(|f| **f != home) {
        found.extend(own_quantiles(f, &code_of(f)));
    }
    assert!(
        found.is_empty(),
        "quantile rules outside graph_ir::stats:\n{}",
        found.join("\n")
    );
}

/// Where `code` computes a quantile itself: a function named for a
/// quantile, percentile or median whose body sorts, or a middle element
/// taken by index (`v[v.len() / 2]`).
fn own_quantiles(f: &Path, code: &str) -> Vec<String> {
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let l = line.trim_start();
        if l.starts_with("//") {
            continue;
        }
        if l.contains("len() / 2]") {
            found.push(format!("{}:{}: {}", f.display(), n + 1, l));
        }
        let decl = l
            .strip_prefix("pub(crate) ")
            .or_else(|| l.strip_prefix("pub "))
            .unwrap_or(l);
        let Some(rest) = decl.strip_prefix("fn ") else { continue };
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let lower = name.to_ascii_lowercase();
        if !["quantile", "percentile", "median"].iter().any(|k| lower.contains(k)) {
            continue;
        }
        let indent = line.len() - l.len();
        let close = format!("{}}}", " ".repeat(indent));
        let body = lines[n..]
            .iter()
            .take_while(|b| **b != close)
            .copied()
            .collect::<Vec<_>>()
            .join("\n");
        if body.contains("sort") || body.contains("select_nth") {
            found.push(format!("{}:{}: fn {name}", f.display(), n + 1));
        }
    }
    found
}

#[test]
fn the_quantile_finder_sees_an_own_rule() {
    let own = "fn p99(v: &[f64]) -> f64 { 0.0 }\nfn quantile(v: &mut [f64]) -> f64 {\n    v.sort_by(f64::total_cmp);\n    v[0]\n}\nfn mid(v: &[f64]) -> f64 { v[v.len() / 2] }\nfn piece_medians() -> f64 {\n    stats::median(&[])\n}\n";
    let found = own_quantiles(Path::new("x.rs"), own);
    assert_eq!(found.len(), 2, "{found:?}");
}

/// The functions of `code` longer than `max` lines, as `file:line: fn name
/// (n lines)`: from a `fn` line to the `}` at its indentation.
fn long_functions(f: &Path, code: &str, max: usize) -> Vec<String> {
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let l = line.trim_start();
        let decl = ["pub(crate) ", "pub(super) ", "pub "]
            .iter()
            .find_map(|p| l.strip_prefix(p))
            .unwrap_or(l);
        let Some(rest) = decl.strip_prefix("fn ") else { continue };
        if l.contains('{') && l.trim_end().ends_with('}') {
            continue;
        }
        let indent = line.len() - l.len();
        let close = format!("{}}}", " ".repeat(indent));
        let Some(end) = lines[n..].iter().position(|b| *b == close) else {
            continue;
        };
        if lines[n..n + end]
            .iter()
            .any(|b| b.trim_end().ends_with(';') && b.trim_start().starts_with("fn "))
        {
            continue;
        }
        if end + 1 > max {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            found.push(format!("{}:{}: fn {name} ({} lines)", f.display(), n + 1, end + 1));
        }
    }
    found
}

/// `stretch-cli` parses, calls the libraries and prints: no command
/// function over 100 lines, no file over 400, and neither timing code nor
/// policy construction (the libraries' `timing`, `bench`, `experiment` and
/// registry do both).
#[test]
fn the_cli_only_parses_calls_and_prints() {
    let mut files = Vec::new();
    rust_files(&crates().join("stretch-cli/src"), &mut files);
    let mut found = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let lines = text.lines().count();
        if lines > 400 {
            found.push(format!("{}: {lines} lines", f.display()));
        }
        let code = code_of(f);
        found.extend(long_functions(f, &code, 100));
        for banned in ["Lst::new", "StaticPlan::new", ".make(", "time_steps(", "mpsc::channel"] {
            if code.contains(banned) {
                found.push(format!("{}: {banned}", f.display()));
            }
        }
    }
    assert!(found.is_empty(), "the CLI does library work:\n{}", found.join("\n"));
}

#[test]
fn the_function_measure_sees_a_long_function() {
    let body = "    x += 1;\n".repeat(101);
    let code = format!(
        "fn short() {{\n}}\npub fn long() {{\n{body}}}\ntrait T {{\n    fn empty(&self) {{}}\n}}\nimpl T for () {{\n{body}}}\n"
    );
    let found = long_functions(Path::new("x.rs"), &code, 100);
    assert_eq!(found, ["x.rs:3: fn long (103 lines)"]);
}

/// Every crate folder of the workspace.
fn workspace_crates() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(crates())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    out.sort();
    assert!(out.len() >= 10, "{out:?}");
    out
}

#[test]
fn one_engine_trait() {
    let mut found = Vec::new();
    for c in workspace_crates() {
        let mut files = Vec::new();
        rust_files(&c.join("src"), &mut files);
        for f in files {
            for (n, line) in code_of(&f).lines().enumerate() {
                let t = line.trim_start();
                let t = t.strip_prefix("pub ").unwrap_or(t);
                let is_engine = t
                    .strip_prefix("trait Engine")
                    .is_some_and(|rest| !rest.starts_with(|c: char| c.is_alphanumeric() || c == '_'));
                if is_engine {
                    found.push(format!("{}:{}", f.display(), n + 1));
                }
            }
        }
    }
    assert_eq!(found.len(), 1, "engine traits: {found:?}");
}

#[test]
fn the_core_imports_no_extension() {
    let src = crates().join("multi-dnn/src");
    let mut files = Vec::new();
    rust_files(&src.join("core"), &mut files);
    assert!(files.len() >= 5, "core/ has {} files", files.len());
    let mut found = Vec::new();
    for f in files {
        let module = imports::module_of(&src, &f);
        for path in imports::referenced(&code_of(&f), &module) {
            if path
                .first()
                .is_some_and(|p| ["heimdall", "splash", "puzzle"].contains(&p.as_str()))
            {
                found.push(format!("{}: {}", f.display(), path.join("::")));
            }
        }
    }
    assert!(found.is_empty(), "the core imports extensions:\n{}", found.join("\n"));
}

/// Each crate's files as (module path, code, is a module root).
fn crate_modules(c: &Path) -> Vec<(Vec<String>, String, bool)> {
    let src = c.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .iter()
        .map(|f| (imports::module_of(&src, f), code_of(f), imports::is_module_root(f)))
        .collect()
}

#[test]
fn no_import_circle_inside_a_folder() {
    let mut found = Vec::new();
    for c in workspace_crates() {
        for circle in imports::circles(&crate_modules(&c)) {
            found.push(format!("{}: {}", c.display(), circle.join(", ")));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn the_circle_finder_sees_three_files() {
    let m = |p: &[&str], code: &str, root: bool| (p.iter().map(|s| s.to_string()).collect(), code.to_string(), root);
    let files = vec![
        m(&[], "mod a; mod b; mod c; mod d;", true),
        m(&["a"], "use crate::{b::X, d};", false),
        m(&["b"], "use crate::c::Y;", false),
        m(&["c"], "fn f() { crate::a::g() }", false),
        m(&["d"], "use crate::a;", false),
        m(&["e"], "use super::f::Z;", true),
        m(&["e", "f"], "use super::g::Z;", false),
        m(&["e", "g"], "use super::f::Z;", false),
    ];
    let found = imports::circles(&files);
    assert_eq!(found, vec![vec!["a".to_string(), "b".into(), "c".into(), "d".into()]]);
}

#[test]
fn no_long_function_in_the_libraries() {
    let mut found = Vec::new();
    for c in workspace_crates().iter().filter(|c| !c.ends_with("stretch-cli")) {
        let mut files = Vec::new();
        rust_files(&c.join("src"), &mut files);
        rust_files(&c.join("examples"), &mut files);
        for f in files {
            found.extend(long_functions(&f, &code_of(&f), 100));
        }
    }
    assert!(found.is_empty(), "functions over 100 lines:\n{}", found.join("\n"));
}

/// Every name and alias the policy registry answers to.
fn policy_names() -> BTreeSet<String> {
    let registry = multi_dnn::registry::Registry::builtin();
    let mut names = BTreeSet::new();
    for e in registry.entries() {
        names.insert(e.name.to_string());
        names.extend(e.aliases.iter().map(|a| a.to_string()));
    }
    assert!(names.len() >= 10, "{names:?}");
    names
}

/// Where `code` names policies itself: a literal that is one policy name
/// (a default) or names two (a list), or a doc comment naming three.
fn own_policy_lists(f: &Path, code: &str, names: &BTreeSet<String>) -> Vec<String> {
    let named = |s: &str| {
        let words = text::words(s);
        words
            .into_iter()
            .filter(|w| names.contains(w))
            .collect::<BTreeSet<_>>()
            .len()
    };
    let mut found = Vec::new();
    for (n, lit) in text::literals(code) {
        let alone = names.contains(lit.trim_end_matches("+cloud"));
        if alone || named(&lit) >= 2 {
            found.push(format!("{}:{n}: \"{lit}\"", f.display()));
        }
    }
    for (n, doc) in text::doc_blocks(code) {
        if named(&doc) >= 3 {
            found.push(format!("{}:{n}: ///{doc}", f.display()));
        }
    }
    found
}

#[test]
fn the_cli_builds_no_policy_list_and_holds_no_sweep_loop() {
    let names = policy_names();
    let mut files = Vec::new();
    rust_files(&crates().join("stretch-cli/src"), &mut files);
    let mut found = Vec::new();
    for f in &files {
        let code = code_of(f);
        found.extend(own_policy_lists(f, &code, &names));
        found.extend(
            text::sweep_loops(&code)
                .into_iter()
                .map(|l| format!("{}:{l}", f.display())),
        );
    }
    assert!(
        found.is_empty(),
        "the CLI lists policies or sweeps:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_cli_rules_see_a_list_and_a_loop() {
    let names = policy_names();
    let code = "/// Policies: lst,\n/// heft or sel.\nfn f() {\n    let d = \"lst\";\n    let l = \"heft,min-heat+cloud\";\n    let ok = \"the whole model\";\n    for m in multipliers {\n        rows.push(simulate(&w, m)?);\n    }\n    for r in &rows {\n        println!(\"{r}\");\n    }\n}\n";
    let lists = own_policy_lists(Path::new("x.rs"), code, &names);
    assert_eq!(lists.len(), 3, "{lists:?}");
    assert_eq!(text::sweep_loops(code), ["7: for m in multipliers {"]);
}

#[test]
fn policy_help_lists_the_registry() {
    let names: Vec<&str> = multi_dnn::registry::Registry::builtin()
        .entries()
        .iter()
        .map(|e| e.name)
        .collect();
    for command in ["simulate", "serve"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_stretch"))
            .args([command, "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{command} --help failed");
        for n in &names {
            assert!(help.contains(n), "{command} --help does not name policy {n}:\n{help}");
        }
    }
}
