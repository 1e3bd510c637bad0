//! Large tool results (D-015), through the real binary and a real host: OpenCode 1.18.4's
//! truncation (2,000 lines or 50 KiB, head first, its notice naming the file with the full
//! text, `metadata.truncated` always and `outputPath` when truncated) applied before
//! `tool.execute.after` sees the result; the full text kept under the data dir; an output over
//! the 1 MiB frame budget passed by a file, never in a frame; over 64 MiB the call fails.

use serde_json::Value;

use crate::support::*;

const NOTICE: &str = "The tool call succeeded but the output was truncated. Full output saved to: ";

fn sandbox() -> Sandbox {
    let s = Sandbox::new();
    s.write(
        "project/.opencode/tools/big.ts",
        r#"export default {
  description: "a large output",
  args: {},
  async execute(args) {
    const kind = process.env.BERTH_TEST_BIG ?? "lines"
    if (kind === "lines") return Array.from({ length: 3000 }, (_, i) => `line ${i + 1}`).join("\n")
    if (kind === "bytes") return "x".repeat(60 * 1024)
    if (kind === "huge") return "y".repeat(3 * 1024 * 1024)
    if (kind === "too-big") return "z".repeat(65 * 1024 * 1024)
    return { output: "small", metadata: { mine: 1 } }
  },
}
"#,
    );
    // Sees what `tool.execute.after` gets: OpenCode truncates before the hooks run.
    s.write(
        "project/.opencode/plugins/seer.ts",
        r#"export default async () => ({
  "tool.execute.after": async (input, output) => {
    output.title = `after saw ${output.output.length} chars, truncated=${output.metadata?.truncated}`
  },
})
"#,
    );
    approve_and_load(|a| s.run_json(a));
    s
}

fn call(s: &Sandbox, kind: &str) -> (i32, Value) {
    let out = s
        .berth(&["invoke", "big"])
        .arg("--json")
        .env("BERTH_TEST_BIG", kind)
        .output()
        .unwrap();
    parse_json_output(&out)
}

#[test]
fn outputs_are_truncated_as_opencode_does_and_the_full_text_is_kept() {
    let s = sandbox();
    // Over 2,000 lines: the first 2,000 lines, the count of the rest, the notice.
    let (code, r) = call(&s, "lines");
    assert_eq!(code, 0, "{r}");
    let out = r["output"].as_str().unwrap();
    let path = r["metadata"]["outputPath"].as_str().unwrap();
    let head: Vec<String> = (1..=2000).map(|i| format!("line {i}")).collect();
    assert_eq!(
        out,
        format!(
            "{}\n\n...1000 lines truncated...\n\n{NOTICE}{path}\nUse the Task tool to have explore agent process this file with Grep and Read (with offset/limit). Do NOT read the full file yourself - delegate to save context.",
            head.join("\n")
        )
    );
    assert_eq!(r["metadata"]["truncated"], true);
    assert!(
        path.starts_with(s.data_dir().join("tool-output").to_str().unwrap()),
        "{path}"
    );
    let full = std::fs::read_to_string(path).unwrap();
    assert_eq!(full.lines().count(), 3000);
    assert_eq!(full.lines().last(), Some("line 3000"));
    // The hook saw the truncated text, as in OpenCode.
    assert_eq!(
        r["title"],
        format!("after saw {} chars, truncated=true", out.len())
    );

    // Over 50 KiB on one line: cut by bytes.
    let (code, r) = call(&s, "bytes");
    assert_eq!(code, 0, "{r}");
    let out = r["output"].as_str().unwrap();
    assert!(
        out.starts_with("\n\n...61440 bytes truncated...\n\n"),
        "{}",
        &out[..80]
    );
    // Small: whole, and `truncated: false` beside the tool's own metadata (OpenCode adds it).
    let (_, r) = call(&s, "small");
    assert_eq!(r["output"], "small");
    assert_eq!(
        r["metadata"],
        serde_json::json!({ "mine": 1, "truncated": false })
    );
}

#[test]
fn an_output_over_the_frame_budget_goes_by_file_and_one_over_the_kept_cap_fails() {
    let s = sandbox();
    let (code, r) = call(&s, "huge");
    assert_eq!(code, 0, "{r}");
    let path = r["metadata"]["outputPath"].as_str().unwrap();
    assert_eq!(std::fs::metadata(path).unwrap().len(), 3 * 1024 * 1024);
    assert!(r["output"].as_str().unwrap().len() < 60 * 1024);
    // Nothing was left where the host wrote it.
    let spills: Vec<_> = std::fs::read_dir(s.data_dir().join("tool-output"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".spill"))
        .collect();
    assert!(spills.is_empty());
    let (code, r) = call(&s, "too-big");
    assert_ne!(code, 0);
    assert_eq!(r["error"]["code"], "invalid-response", "{r}");
}
