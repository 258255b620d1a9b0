//! A plugin manifest's image (`icon`, Agent Plugins 1.1; `logo`, Cursor) as the plugin's AHP
//! `icons`: an http(s) or `data:image/` URL as written, a file inside the plugin as a `data:` URI.

use std::path::Path;

use ahp_types::state::Icon;
use base64::Engine as _;

use super::components::Bounds;
use super::display_path;

/// Largest image file read into a `data:` URI.
pub const MAX_ICON_BYTES: u64 = 128 * 1024;

/// The manifest keys that name the plugin's image, in the order they are looked for.
pub const KEYS: &[&str] = &["icon", "logo"];

/// The icon `value` names, relative to the plugin folder `root` when it is a path; or why
/// it cannot be shown.
pub fn from_manifest(value: &str, root: &Path, bounds: &Bounds) -> Result<Icon, String> {
    let icon = |src: String, content_type: Option<&str>| Icon {
        src,
        content_type: content_type.map(str::to_string),
        sizes: None,
        theme: None,
    };
    if ["https://", "http://", "data:image/"]
        .iter()
        .any(|scheme| value.starts_with(scheme))
    {
        return Ok(icon(value.to_string(), None));
    }
    let scheme = value.split_once(':').map(|(scheme, _)| scheme);
    let other_url = scheme.is_some_and(|s| {
        s.len() > 1
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    });
    if other_url || value.is_empty() {
        return Err(format!(
            "icon {value:?} is not shown: name an https:// or data:image/ URL, or an image file inside the plugin"
        ));
    }
    let path = root.join(value);
    let real = bounds.check(&path).map_err(|problem| problem.to_string())?;
    let shown = display_path(&path, bounds.display_base);
    let mime = image_type(&real).ok_or_else(|| {
        format!("{shown}: not an image an icon can be (png, jpg, gif, webp, svg, ico)")
    })?;
    let bytes = crate::file_read::read(&real, MAX_ICON_BYTES).map_err(|e| match e {
        crate::file_read::ReadError::TooLarge(_) => {
            format!("{shown}: an icon of more than {MAX_ICON_BYTES} bytes is not shown")
        }
        e => format!("{shown}: cannot read the icon: {e}"),
    })?;
    let data = base64::engine::general_purpose::STANDARD.encode(&bytes);
    Ok(icon(format!("data:{mime};base64,{data}"), Some(mime)))
}

/// The image type of a file, by its extension.
fn image_type(path: &Path) -> Option<&'static str> {
    let extension = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "ico" => "image/x-icon",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("ahp-proxy-icon-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("p/assets")).unwrap();
        std::fs::canonicalize(&dir).unwrap()
    }

    #[test]
    fn urls_pass_files_become_data_uris_and_the_rest_is_refused() {
        let dir = scratch("kinds");
        let root = dir.join("p");
        std::fs::write(root.join("assets/logo.SVG"), "<svg/>").unwrap();
        std::fs::write(dir.join("outside.png"), "x").unwrap();
        std::fs::write(root.join("assets/notes.txt"), "x").unwrap();
        std::fs::write(
            root.join("assets/huge.png"),
            vec![0u8; MAX_ICON_BYTES as usize + 1],
        )
        .unwrap();
        let bounds = Bounds {
            root: &root,
            display_base: &dir,
        };
        let url = from_manifest("https://example.com/i.png", &root, &bounds).unwrap();
        assert_eq!(url.src, "https://example.com/i.png");
        let file = from_manifest("assets/logo.SVG", &root, &bounds).unwrap();
        assert_eq!(file.src, "data:image/svg+xml;base64,PHN2Zy8+");
        assert_eq!(file.content_type.as_deref(), Some("image/svg+xml"));
        for (value, says) in [
            ("../outside.png", "outside the plugin folder"),
            ("/etc/passwd", "outside the plugin folder"),
            ("assets/notes.txt", "not an image"),
            ("assets/huge.png", "more than"),
            ("assets/missing.png", "cannot resolve"),
            ("file:///etc/passwd", "is not shown"),
            ("javascript:alert(1)", "is not shown"),
        ] {
            let error = from_manifest(value, &root, &bounds).unwrap_err();
            assert!(error.contains(says), "{value}: {error}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
