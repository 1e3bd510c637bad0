//! The names an MCP client sees for the catalog's tools.
//!
//! Owns: turning catalog names into MCP tool names that cannot collide. Must not: decide which
//! tool a name resolves to in the catalog (the catalog did), or rename one silently: a name
//! is changed only when MCP cannot carry it, and then deterministically.

use std::collections::HashSet;

/// The longest tool name MCP clients accept (`^[a-zA-Z0-9_.-]{1,128}$`).
const MAX_NAME: usize = 128;

/// For each catalog name, in order, the MCP name it is served under: the name itself when
/// MCP can carry it (the catalog's names are unique already), else the name with every
/// character MCP refuses replaced by `_`, shortened to 128, and — if that meets a name taken
/// before it — suffixed `_2`, `_3`, … So a list that does not change keeps its names.
pub fn mcp_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let names: Vec<&str> = names.into_iter().collect();
    // Names MCP carries as they are keep them, whatever comes before them.
    let mut taken: HashSet<String> = names
        .iter()
        .filter(|n| carried(n))
        .map(|n| n.to_string())
        .collect();
    names
        .iter()
        .map(|n| {
            if carried(n) {
                return n.to_string();
            }
            let base: String = n
                .chars()
                .map(|c| if allowed(c) { c } else { '_' })
                .take(MAX_NAME)
                .collect();
            let base = if base.is_empty() {
                "_".to_string()
            } else {
                base
            };
            let mut candidate = base.clone();
            let mut k = 2;
            while taken.contains(&candidate) {
                let suffix = format!("_{k}");
                let keep = MAX_NAME.saturating_sub(suffix.len()).min(base.len());
                candidate = format!("{}{suffix}", &base[..keep]);
                k += 1;
            }
            taken.insert(candidate.clone());
            candidate
        })
        .collect()
}

fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

fn carried(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME && name.chars().all(allowed)
}

#[cfg(test)]
mod tests {
    use super::mcp_names;

    #[test]
    fn names_mcp_carries_are_kept_and_the_others_cannot_collide() {
        let names = mcp_names([
            "hello",
            "my-tool_v2.read",
            "héllo",
            "h_llo",
            "h llo",
            &"x".repeat(200),
        ]);
        assert_eq!(names[0], "hello");
        assert_eq!(names[1], "my-tool_v2.read");
        // `héllo` and `h llo` both sanitize to `h_llo`, which a real tool already has.
        assert_eq!(names[3], "h_llo");
        assert_eq!(names[2], "h_llo_2");
        assert_eq!(names[4], "h_llo_3");
        assert_eq!(names[5].len(), 128);
        let unique: std::collections::HashSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len());
        // Negative control: plain sanitizing alone would collide.
        let plain: Vec<String> = ["héllo", "h_llo"]
            .iter()
            .map(|n| {
                n.chars()
                    .map(|c| if c.is_ascii() { c } else { '_' })
                    .collect()
            })
            .collect();
        assert_eq!(plain[0], plain[1]);
    }
}
