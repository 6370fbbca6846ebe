//! The data files of a corpus: expanding the configured names and glob patterns into files,
//! and telling whether a file is still the one that was indexed.
//!
//! A file is identified by a [`FileStamp`] (size, modification time in nanoseconds, device and
//! inode) and a hash of its first and last 64 KiB ([`content_hash`]). The indexer records
//! both; the index cache is reused only when both match, and the chunk loader refuses to read
//! a file whose stamp has changed.

use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::Xxh3;

use crate::quote::file_name;

/// Bytes hashed at each end of a data file by [`content_hash`].
pub const HASHED_END_BYTES: u64 = 64 * 1024;

/// What identifies a data file's version: any change to the file changes it, except a
/// rewrite of the same size within the file system's timestamp resolution that also restores
/// the modification time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FileStamp {
    /// Size in bytes.
    pub size: u64,
    /// Modification time: nanoseconds since the Unix epoch (negative before it).
    pub mtime_ns: i128,
    /// Device of the file system holding it.
    pub dev: u64,
    /// Inode number (a file replaced by a rename has a new one).
    pub ino: u64,
}

impl FileStamp {
    /// The stamp of a file from its metadata.
    pub fn of(meta: &Metadata) -> Self {
        FileStamp {
            size: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
            dev: meta.dev(),
            ino: meta.ino(),
        }
    }

    /// The stamp of an open file.
    pub fn of_file(file: &File) -> io::Result<Self> {
        Ok(Self::of(&file.metadata()?))
    }

    /// The stamp of the file a path names now.
    pub fn of_path(path: &Path) -> io::Result<Self> {
        Ok(Self::of(&std::fs::metadata(path)?))
    }

    /// How `now` differs from `self`, in words, or `None` when it does not.
    pub fn describe_change(&self, now: &FileStamp) -> Option<String> {
        if (self.dev, self.ino) != (now.dev, now.ino) {
            Some("it was replaced by another file".to_string())
        } else if now.size < self.size {
            Some(format!(
                "it is now {} bytes, shorter than the {} indexed",
                now.size, self.size
            ))
        } else if now.size > self.size {
            Some(format!(
                "it is now {} bytes, longer than the {} indexed",
                now.size, self.size
            ))
        } else if now.mtime_ns != self.mtime_ns {
            Some("it was modified".to_string())
        } else {
            None
        }
    }
}

/// XXH3-64 (seed 0) of the first 64 KiB of the file followed by its last 64 KiB (the whole
/// file, once, when it is at most 128 KiB).
pub fn content_hash(file: &File, size: u64) -> io::Result<u64> {
    let mut hasher = Xxh3::new();
    let mut buf = vec![0u8; HASHED_END_BYTES as usize];
    let head = size.min(2 * HASHED_END_BYTES);
    let ranges = if head == size {
        [(0, size), (size, 0)]
    } else {
        [
            (0, HASHED_END_BYTES),
            (size - HASHED_END_BYTES, HASHED_END_BYTES),
        ]
    };
    for (start, len) in ranges {
        let mut done = 0;
        while done < len {
            let n = (len - done).min(buf.len() as u64) as usize;
            file.read_exact_at(&mut buf[..n], start + done)?;
            hasher.update(&buf[..n]);
            done += n as u64;
        }
    }
    Ok(hasher.digest())
}

/// A data file of the corpus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataFile {
    /// The name diagnostics use: as written in the configuration, or a glob's match.
    pub name: String,
    /// The path to open (relative paths resolve against the current directory).
    pub path: PathBuf,
}

fn is_pattern(name: &str) -> bool {
    name.contains(['*', '?', '['])
}

/// Expands the configured file names into the files of the corpus, in order. A name that
/// contains `*`, `?` or `[` and does not name an existing file is a glob pattern: it stands
/// for the regular files it matches, sorted by path (`*` does not cross `/`; `**` as a whole
/// path component matches any number of directories, none included). A pattern that
/// matches nothing is an error naming it.
pub fn expand_file_patterns(names: &[String]) -> Result<Vec<DataFile>, (String, io::Error)> {
    let mut files = Vec::new();
    for name in names {
        if !is_pattern(name) || Path::new(name).exists() {
            files.push(DataFile {
                name: name.clone(),
                path: PathBuf::from(name),
            });
            continue;
        }
        let options = glob::MatchOptions {
            case_sensitive: true,
            require_literal_separator: true,
            require_literal_leading_dot: false,
        };
        let paths = glob::glob_with(name, options).map_err(|e| {
            let message = format!("invalid file pattern: {e}");
            (
                name.clone(),
                io::Error::new(io::ErrorKind::InvalidInput, message),
            )
        })?;
        let mut matched: Vec<PathBuf> = Vec::new();
        for entry in paths {
            let path = entry.map_err(|e| {
                let message = format!(
                    "cannot list {}: {}",
                    file_name(&e.path().display().to_string()),
                    e.error()
                );
                (name.clone(), io::Error::new(e.error().kind(), message))
            })?;
            if path.is_file() {
                matched.push(path);
            }
        }
        if matched.is_empty() {
            let message = "no file matches this pattern";
            return Err((
                name.clone(),
                io::Error::new(io::ErrorKind::NotFound, message),
            ));
        }
        matched.sort();
        files.extend(matched.into_iter().map(|path| DataFile {
            name: path.to_string_lossy().into_owned(),
            path,
        }));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_expand_sorted_and_literal_names_win() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "part-10.ctf",
            "part-2.ctf",
            "part-1.ctf",
            "other.txt",
            "lit[1].ctf",
        ] {
            std::fs::write(dir.path().join(name), "|a 1\n").unwrap();
        }
        std::fs::create_dir(dir.path().join("part-dir.ctf")).unwrap();
        let d = dir.path().to_str().unwrap();
        let names = vec![format!("{d}/part-*.ctf"), format!("{d}/lit[1].ctf")];
        let files = expand_file_patterns(&names).unwrap();
        let got: Vec<String> = files
            .iter()
            .map(|f| f.name.strip_prefix(d).unwrap().to_string())
            .collect();
        assert_eq!(
            got,
            ["/part-1.ctf", "/part-10.ctf", "/part-2.ctf", "/lit[1].ctf"]
        );
        let missing = expand_file_patterns(&[format!("{d}/nothing-*.ctf")]).unwrap_err();
        assert_eq!(missing.1.kind(), io::ErrorKind::NotFound);
        // A plain missing name is left for the open to report.
        assert_eq!(
            expand_file_patterns(&[format!("{d}/gone.ctf")])
                .unwrap()
                .len(),
            1
        );
        // `*` stays within a directory; `**` as a whole component spans any number of them.
        std::fs::create_dir_all(dir.path().join("deep/er")).unwrap();
        std::fs::write(dir.path().join("deep/er/part-3.ctf"), "|a 1\n").unwrap();
        let names = |pattern: &str| -> Vec<String> {
            expand_file_patterns(&[format!("{d}/{pattern}")])
                .unwrap()
                .iter()
                .map(|f| f.name.strip_prefix(d).unwrap().to_string())
                .collect()
        };
        assert_eq!(names("*/*/part-*.ctf"), ["/deep/er/part-3.ctf"]);
        assert_eq!(
            names("**/part-*.ctf"),
            [
                "/deep/er/part-3.ctf",
                "/part-1.ctf",
                "/part-10.ctf",
                "/part-2.ctf"
            ]
        );
        let shallow = expand_file_patterns(&[format!("{d}/*/part-*.ctf")]).unwrap_err();
        assert_eq!(shallow.1.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn content_hash_covers_both_ends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut data = vec![b'x'; 300 * 1024];
        std::fs::write(&path, &data).unwrap();
        let h1 = content_hash(&File::open(&path).unwrap(), data.len() as u64).unwrap();
        data[300 * 1024 - 1] = b'y';
        std::fs::write(&path, &data).unwrap();
        let h2 = content_hash(&File::open(&path).unwrap(), data.len() as u64).unwrap();
        data[150 * 1024] = b'z'; // the middle is not hashed
        std::fs::write(&path, &data).unwrap();
        let h3 = content_hash(&File::open(&path).unwrap(), data.len() as u64).unwrap();
        assert_ne!(h1, h2);
        assert_eq!(h2, h3);
    }
}
