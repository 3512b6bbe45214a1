//! A JSON-lines log whose records belong to epochs (`metrics.jsonl`,
//! `theory.jsonl`): rewritten atomically on every append (so a reader never
//! sees half a line) and cut back to the checkpointed epochs when a run
//! resumes, so a resumed run's log is byte for byte the uninterrupted one's.

use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::atomic::write_atomic;
use super::error::{Result, TrainError};

/// A log of records of type `T`, each of which carries an `epoch` field
/// (1-based) that [`EpochLog::truncate_after`] reads.
#[derive(Debug, Clone)]
pub struct EpochLog<T> {
    path: PathBuf,
    record: PhantomData<fn() -> T>,
}

impl<T: Serialize + DeserializeOwned> EpochLog<T> {
    /// The log at `path` (created on the first append).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        EpochLog {
            path: path.into(),
            record: PhantomData,
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The log's records, in file order; an absent file is an empty log.
    pub fn read(&self) -> Result<Vec<T>> {
        self.lines()?
            .iter()
            .map(|(number, line)| self.parse(*number, line))
            .collect()
    }

    /// The epoch of each line, with its 1-based line number, in file order;
    /// an absent file has none.
    pub fn epochs(&self) -> Result<Vec<(usize, usize)>> {
        self.lines()?
            .iter()
            .map(|(number, line)| Ok((*number, self.parse::<EpochOnly>(*number, line)?.epoch)))
            .collect()
    }

    /// Appends one record (see [`EpochLog::append_all`]).
    pub fn append(&self, record: &T) -> Result<()> {
        self.append_all(std::slice::from_ref(record))
    }

    /// Appends `records` in one atomic rewrite; earlier lines are kept byte
    /// for byte.
    pub fn append_all(&self, records: &[T]) -> Result<()> {
        let mut lines: Vec<String> = self.lines()?.into_iter().map(|(_, l)| l).collect();
        for record in records {
            lines.push(
                serde_json::to_string(record).map_err(|e| TrainError::Corrupt {
                    path: self.path.clone(),
                    message: e.to_string(),
                })?,
            );
        }
        self.write(&lines)
    }

    /// Drops the records of epochs after `epochs_done` (those a killed run
    /// logged before its checkpoint was written; resuming repeats them).
    pub fn truncate_after(&self, epochs_done: usize) -> Result<()> {
        let mut kept = Vec::new();
        for (number, line) in self.lines()? {
            if self.parse::<EpochOnly>(number, &line)?.epoch <= epochs_done {
                kept.push(line);
            }
        }
        self.write(&kept)
    }

    /// Non-empty lines with their 1-based line numbers.
    fn lines(&self) -> Result<Vec<(usize, String)>> {
        if !self.path.exists() {
            return Ok(Vec::new());
        }
        let text =
            std::fs::read_to_string(&self.path).map_err(TrainError::io("read", &self.path))?;
        Ok(text
            .lines()
            .enumerate()
            .filter(|(_, line)| !line.trim().is_empty())
            .map(|(i, line)| (i + 1, line.to_string()))
            .collect())
    }

    fn parse<R: DeserializeOwned>(&self, number: usize, line: &str) -> Result<R> {
        serde_json::from_str(line).map_err(|e| TrainError::Corrupt {
            path: self.path.clone(),
            message: format!("line {number}: {e}"),
        })
    }

    fn write(&self, lines: &[String]) -> Result<()> {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        write_atomic(&self.path, text.as_bytes())
    }
}

/// The one field `truncate_after` and `epochs` need from a line.
#[derive(Deserialize)]
struct EpochOnly {
    epoch: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Record {
        epoch: usize,
        value: f64,
    }

    #[test]
    fn truncation_keeps_earlier_lines_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let log = EpochLog::<Record>::new(&path);
        // A value whose shortest decimal form does not survive a lossy parse.
        let first = Record {
            epoch: 1,
            value: 0.369_623_653_510_116_83,
        };
        log.append_all(&[
            first,
            Record {
                epoch: 1,
                value: 2.0,
            },
        ])
        .unwrap();
        let after_first = std::fs::read(&path).unwrap();
        log.append(&Record {
            epoch: 2,
            value: 0.2,
        })
        .unwrap();
        log.append(&Record {
            epoch: 3,
            value: 0.1,
        })
        .unwrap();
        assert_eq!(log.read().unwrap().len(), 4);
        log.truncate_after(1).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), after_first);
        // JSON writes f64 in its shortest round-trip form: read back exactly.
        assert_eq!(log.read().unwrap()[0].value, 0.369_623_653_510_116_83);
    }

    #[test]
    fn corrupt_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        std::fs::write(&path, "{\"epoch\": 1}\nnot json\n").unwrap();
        let err = EpochLog::<Record>::new(&path)
            .truncate_after(5)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
    }
}
