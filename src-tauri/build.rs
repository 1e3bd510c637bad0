fn main() {
    // The config lives at the workspace top (design card); the app's own commands are declared
    // so that capabilities/default.json can grant exactly them to the main window.
    let attrs = tauri_build::Attributes::new()
        .config_path("../tauri.conf.json")
        .app_manifest(tauri_build::AppManifest::new().commands(&[
            "status",
            "approve",
            "deny",
            "answer_prompt",
            "resume",
            "set_policy",
            "grant",
            "check_updates",
            "update",
            "rollback",
            "choose",
            "prepare",
            "mcp_sign_in",
            "mcp_sign_out",
            "open_folder",
            "invoke_tool",
            "cancel_call",
            "projects",
            "open_project",
            "forget_project",
        ]));
    tauri_build::try_build(attrs).expect("failed to run tauri-build");
}
