//! Reading a file a user or a client named (proxy.toml, a manifest, an `envFile`, an icon, a
//! resource): regular files only, opened without blocking, never more than a given size.
//!
//! The file is opened with `O_NONBLOCK` (a FIFO never stalls the reader, even one swapped
//! in after a check), then judged by what was opened (`fstat`), so a FIFO, a device such as
//! `/dev/zero` or a folder is refused without a byte read, and at most `max + 1` bytes are
//! ever read of a regular one.

use std::io::Read;
use std::path::Path;

/// The most a file written by hand may hold (proxy.toml, a manifest, a frontmatter file, an
/// `envFile`): they are small.
pub const MAX_SOURCE_BYTES: u64 = 4 * 1024 * 1024;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The system's own error (missing, permission, a symbolic link loop, …).
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// A FIFO, a device, a socket or a folder.
    #[error("not a regular file")]
    NotRegular,
    /// More than the caller's limit.
    #[error("larger than {0} bytes")]
    TooLarge(u64),
}

impl ReadError {
    /// Whether the path is a symbolic link loop (or, with [`read_no_follow`], a link).
    pub fn is_link_loop(&self) -> bool {
        matches!(self, ReadError::Io(e) if e.raw_os_error() == Some(libc::ELOOP))
    }
}

/// The bytes of the regular file at `path` (symbolic links followed), at most `max`.
pub fn read(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    read_with(path, max, 0)
}

/// The same, without following a symbolic link in the last component (`ELOOP` then).
pub fn read_no_follow(path: &Path, max: u64) -> Result<Vec<u8>, ReadError> {
    read_with(path, max, libc::O_NOFOLLOW)
}

/// The text of the regular file at `path`, at most `max` bytes; invalid UTF-8 is an
/// [`std::io::ErrorKind::InvalidData`] error.
pub fn read_text(path: &Path, max: u64) -> Result<String, ReadError> {
    let bytes = read(path, max)?;
    String::from_utf8(bytes).map_err(|e| {
        ReadError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not valid UTF-8 (byte {})", e.utf8_error().valid_up_to()),
        ))
    })
}

fn read_with(path: &Path, max: u64, flags: libc::c_int) -> Result<Vec<u8>, ReadError> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | flags)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(ReadError::NotRegular);
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(ReadError::TooLarge(max));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("ahp-proxy-file-read-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn only_regular_files_within_the_limit_are_read() {
        let dir = scratch("kinds");
        let small = dir.join("small");
        std::fs::write(&small, "abc").unwrap();
        assert_eq!(read(&small, 3).unwrap(), b"abc");
        assert!(matches!(read(&small, 2), Err(ReadError::TooLarge(2))));
        assert!(matches!(read(&dir, 10), Err(ReadError::NotRegular)));
        assert!(matches!(
            read(Path::new("/dev/zero"), 10),
            Err(ReadError::NotRegular)
        ));
        // A FIFO nobody writes to: refused at once, not waited on.
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(matches!(read(&fifo, 10), Err(ReadError::NotRegular)));
        let link = dir.join("link");
        std::os::unix::fs::symlink(&small, &link).unwrap();
        assert_eq!(read(&link, 10).unwrap(), b"abc");
        assert!(read_no_follow(&link, 10).unwrap_err().is_link_loop());
        std::fs::write(&small, b"\xff").unwrap();
        assert_eq!(
            read_text(&small, 10).unwrap_err().to_string(),
            "not valid UTF-8 (byte 0)"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
