//! The workspace's structural rules (ARCHITECTURE.md, "Invariants"),
//! checked on the source tree:
//! - `scheduler-rt` serves one model and knows nothing of multi-DNN
//!   serving: no `multi` module, no dependency on `multi-dnn`;
//! - no file of `multi-dnn/src/policy/` or `multi-dnn/src/core/` imports a
//!   paper's folder (`heimdall/`, `splash/`, `puzzle/`);
//! - no import circle crosses `multi-dnn`'s folders;
//! - one percentile rule: no quantile, percentile or median function is
//!   defined outside `graph-ir/src/stats.rs` (tests aside);
//! - `stretch-cli` only parses, calls the libraries and prints.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn crates() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
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

#[test]
fn the_core_imports_no_paper() {
    let mut files = Vec::new();
    rust_files(&crates().join("multi-dnn/src/core"), &mut files);
    assert!(files.len() >= 10, "core/ has {} files", files.len());
    for f in files {
        let code = code_of(&f);
        let used = crate_folders(&code);
        for paper in ["heimdall", "splash", "puzzle"] {
            assert!(
                !used.contains(paper) && !code.contains(&format!("super::super::{paper}")),
                "{} imports {paper}/",
                f.display()
            );
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
    let code = format!("fn short() {{\n}}\npub fn long() {{\n{body}}}\n");
    let found = long_functions(Path::new("x.rs"), &code, 100);
    assert_eq!(found, ["x.rs:3: fn long (103 lines)"]);
}
