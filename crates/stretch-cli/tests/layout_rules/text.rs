//! String literals, doc lines and loops in Rust source text.

/// The string literals of `code` (escapes left as written; raw strings
/// included), with their 1-based line numbers; `//` comments skipped.
pub fn literals(code: &str) -> Vec<(usize, String)> {
    let s = code.as_bytes();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'\n' => line += 1,
            b'/' if s.get(i + 1) == Some(&b'/') => {
                while i < s.len() && s[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\'' => {
                let close = s[i + 1..].iter().take(4).position(|&b| b == b'\'');
                if let Some(k) = close.filter(|&k| k > 0) {
                    i += k + 2;
                    continue;
                }
            }
            b'"' => {
                let raw = i > 0 && (s[i - 1] == b'r' || s[i - 1] == b'#');
                let hashes = s[..i].iter().rev().take_while(|&&b| b == b'#').count();
                let start = i + 1;
                let mut j = start;
                loop {
                    if j >= s.len() {
                        break;
                    }
                    if !raw && s[j] == b'\\' {
                        j += 2;
                        continue;
                    }
                    if s[j] == b'"' && s[j + 1..].iter().take(hashes).filter(|&&b| b == b'#').count() == hashes {
                        break;
                    }
                    j += 1;
                }
                let lit = String::from_utf8_lossy(&s[start..j.min(s.len())]).to_string();
                line += lit.matches('\n').count();
                out.push((line, lit));
                i = j + 1 + hashes;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// The doc comments of `code` (runs of `///` or `//!` lines, joined),
/// each with the line number of its first line.
pub fn doc_blocks(code: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut last = 0;
    for (n, l) in code.lines().enumerate() {
        let t = l.trim_start();
        if !(t.starts_with("///") || t.starts_with("//!")) {
            continue;
        }
        match out.last_mut() {
            Some((_, block)) if last + 1 == n => {
                block.push('\n');
                block.push_str(&t[3..]);
            }
            _ => out.push((n + 1, t[3..].to_string())),
        }
        last = n;
    }
    out
}

/// The words of `text` a policy name could be (`min-heat+cloud` →
/// `min-heat`; `lst,heft` → `lst`, `heft`).
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '+' || c == '_'))
        .map(|w| w.trim_end_matches("+cloud").to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

/// The `for` loops of `code` over policies, plans, rates or multipliers
/// whose bodies call a function whose name holds `simulate`, `serve` or
/// `run` (a sweep), as `line: for ...`.
pub fn sweep_loops(code: &str) -> Vec<String> {
    let lines: Vec<&str> = code.lines().collect();
    let mut found = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        if !t.starts_with("for ") || !t.trim_end().ends_with('{') {
            continue;
        }
        let over = t.split_once(" in ").map_or("", |(_, e)| e).to_ascii_lowercase();
        if !["polic", "plan", "rate", "fps", "multiplier", "compare"]
            .iter()
            .any(|k| over.contains(k))
        {
            continue;
        }
        let indent = line.len() - t.len();
        let close = format!("{}}}", " ".repeat(indent));
        let Some(end) = lines[n + 1..].iter().position(|b| b.starts_with(&close)) else {
            continue;
        };
        let body = lines[n + 1..n + 1 + end].join("\n");
        if calls_a_run(&body) {
            found.push(format!("{}: {}", n + 1, t));
        }
    }
    found
}

fn calls_a_run(body: &str) -> bool {
    let b = body.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_alphabetic() || b[i] == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let word = &body[start..i];
            let called = b.get(i) == Some(&b'(');
            let is_macro = b.get(i) == Some(&b'!');
            if called && !is_macro && ["simulate", "serve", "run"].iter().any(|k| word.contains(k)) {
                return true;
            }
        } else {
            i += 1;
        }
    }
    false
}
