//! Finding a stdio server's program without starting it, where the spawn would look: a
//! command with a `/` in its working directory, any other on `PATH` (the server's own when
//! its `env` sets one). What `check` reports for a program that is not installed.

use std::path::Path;

use super::SpawnError;

/// `Ok` when `command` names a file the spawn could run; else the error the spawn would
/// fail with (`NotFound` or `PermissionDenied`, naming only the command's file name).
pub fn look_up(
    command: &str,
    env: &std::collections::BTreeMap<String, String>,
    cwd: Option<&Path>,
) -> Result<(), SpawnError> {
    let here = cwd.map_or_else(|| Path::new(".").to_path_buf(), Path::to_path_buf);
    let candidates: Vec<std::path::PathBuf> = if command.contains('/') {
        vec![here.join(command)]
    } else {
        let path = env
            .get("PATH")
            .cloned()
            .or_else(|| std::env::var("PATH").ok())
            .unwrap_or_default();
        // An empty entry is the working directory, as for `execvp`.
        path.split(':')
            .map(|dir| {
                here.join(if dir.is_empty() { "." } else { dir })
                    .join(command)
            })
            .collect()
    };
    let mut found_unrunnable = false;
    for candidate in candidates {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::metadata(&candidate) {
            Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => return Ok(()),
            Ok(meta) if meta.is_file() => found_unrunnable = true,
            _ => {}
        }
    }
    let name = super::file_name(command);
    Err(if found_unrunnable {
        SpawnError::PermissionDenied(name)
    } else {
        SpawnError::NotFound(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn programs_are_found_where_the_spawn_would_look() {
        let none = BTreeMap::new();
        assert!(look_up("sh", &none, None).is_ok(), "on the process's PATH");
        assert!(matches!(
            look_up("ahp-proxy-no-such-program", &none, None),
            Err(SpawnError::NotFound(name)) if name == "ahp-proxy-no-such-program"
        ));
        // The server's own PATH wins.
        let own = BTreeMap::from([("PATH".to_string(), "/nowhere".to_string())]);
        assert!(look_up("sh", &own, None).is_err());
        // A relative path is relative to the working directory.
        assert!(look_up("bin/sh", &none, Some(Path::new("/"))).is_ok());
        assert!(look_up("bin/sh", &none, Some(Path::new("/nowhere"))).is_err());
        // A file that cannot be run.
        let plain =
            std::env::temp_dir().join(format!("ahp-proxy-not-runnable-{}", std::process::id()));
        std::fs::write(&plain, "").unwrap();
        assert!(matches!(
            look_up(&plain.display().to_string(), &none, None),
            Err(SpawnError::PermissionDenied(_))
        ));
        let _ = std::fs::remove_file(&plain);
    }
}
