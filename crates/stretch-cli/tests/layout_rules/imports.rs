//! File-level imports inside a crate: which module paths a file names
//! through `crate::`, `super::` and `self::` (braced `use` lists
//! expanded), and the circles those references make among the files of
//! one folder.

use std::collections::BTreeSet;
use std::path::Path;

/// The module path of `file` under the crate's `src` (`src/a/b.rs` and
/// `src/a/b/mod.rs` → `[a, b]`; `lib.rs` and `main.rs` → `[]`).
pub fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_string())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !(parts.is_empty() && (stem == "lib" || stem == "main")) && stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

/// Whether `file` is a folder's or the crate's own module file.
pub fn is_module_root(file: &Path) -> bool {
    matches!(
        file.file_name().and_then(|n| n.to_str()),
        Some("mod.rs" | "lib.rs" | "main.rs")
    )
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

fn skip_ws(s: &[u8], i: &mut usize) {
    while *i < s.len() && s[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

/// The paths of one `use` tree starting at `s[*i]` (`a::{b, c::d}` →
/// `[a, b]`, `[a, c, d]`).
fn tree(s: &[u8], i: &mut usize) -> Vec<Vec<String>> {
    skip_ws(s, i);
    if *i < s.len() && s[*i] == b'{' {
        *i += 1;
        let mut out = Vec::new();
        loop {
            skip_ws(s, i);
            if *i >= s.len() {
                return out;
            }
            if s[*i] == b'}' {
                *i += 1;
                return out;
            }
            out.extend(tree(s, i));
            while *i < s.len() && !matches!(s[*i], b',' | b'}' | b';') {
                *i += 1;
            }
            if *i < s.len() && s[*i] == b',' {
                *i += 1;
            } else if *i < s.len() && s[*i] == b'}' {
                *i += 1;
                return out;
            } else {
                return out;
            }
        }
    }
    let start = *i;
    while *i < s.len() && (is_ident(s[*i]) || s[*i] == b'*') {
        *i += 1;
    }
    let name = String::from_utf8_lossy(&s[start..*i]).to_string();
    if name.is_empty() {
        return vec![Vec::new()];
    }
    if s[*i..].starts_with(b"::") {
        *i += 2;
        tree(s, i)
            .into_iter()
            .map(|mut p| {
                p.insert(0, name.clone());
                p
            })
            .collect()
    } else {
        vec![vec![name]]
    }
}

/// The absolute module paths `code`, the text of the module at `module`,
/// names through `crate::`, `super::` and `self::` (comment lines aside).
pub fn referenced(code: &str, module: &[String]) -> BTreeSet<Vec<String>> {
    let text: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let s = text.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < s.len() {
        let at_word = i == 0 || !(is_ident(s[i - 1]) || s[i - 1] == b':');
        let anchor = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|a| at_word && s[i..].starts_with(a.as_bytes()));
        let Some(anchor) = anchor else {
            i += 1;
            continue;
        };
        let mut base: Vec<String> = match anchor {
            "crate::" => Vec::new(),
            _ => module.to_vec(),
        };
        i += anchor.len();
        if anchor == "super::" {
            let mut ups = 1;
            while s[i..].starts_with(b"super::") {
                ups += 1;
                i += "super::".len();
            }
            for _ in 0..ups {
                base.pop();
            }
        }
        for p in tree(s, &mut i) {
            let mut full = base.clone();
            full.extend(p.into_iter().filter(|x| x != "*" && x != "self"));
            out.insert(full);
        }
    }
    out
}

/// The circles of more than two files among `files` (module path, code,
/// whether the file is its module's root), each as its files' module
/// paths joined with `::`. Only references between files of the same
/// folder count; a module root's own files are not siblings of it.
pub fn circles(files: &[(Vec<String>, String, bool)]) -> Vec<Vec<String>> {
    let n = files.len();
    let mut edges = vec![BTreeSet::new(); n];
    for (a, (module, code, root)) in files.iter().enumerate() {
        if *root {
            continue;
        }
        let parent = &module[..module.len() - 1];
        for path in referenced(code, module) {
            for (b, (other, _, other_root)) in files.iter().enumerate() {
                let sibling =
                    b != a && !*other_root && other.len() == module.len() && &other[..other.len() - 1] == parent;
                if sibling && path.starts_with(other) {
                    edges[a].insert(b);
                }
            }
        }
    }
    let reach = |from: usize| {
        let mut seen = BTreeSet::from([from]);
        let mut stack = vec![from];
        while let Some(x) = stack.pop() {
            for &y in &edges[x] {
                if seen.insert(y) {
                    stack.push(y);
                }
            }
        }
        seen
    };
    let reaches: Vec<BTreeSet<usize>> = (0..n).map(reach).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for a in 0..n {
        if done.contains(&a) {
            continue;
        }
        let scc: Vec<usize> = (0..n)
            .filter(|&b| reaches[a].contains(&b) && reaches[b].contains(&a))
            .collect();
        done.extend(scc.iter().copied());
        if scc.len() > 2 {
            out.push(scc.iter().map(|&i| files[i].0.join("::")).collect());
        }
    }
    out
}
