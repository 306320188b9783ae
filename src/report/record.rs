//! One observed graph break (or failed fullgraph compile), as `hooks/observer/dynamo_observer.py`
//! builds it and as it is stored, one JSON object per line, in the report files.

use serde::{Deserialize, Serialize};

/// A source position. The observer fills `package`/`stdlib` for library frames; the user
/// frame carries only file, line and function.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Frame {
    pub file: String,
    pub line: u32,
    #[serde(default)]
    pub function: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stdlib: bool,
}

impl Frame {
    /// `file:line`, the part of a frame that identifies a site.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }

    /// Parses the observer's `stack` entries, `file:line in function`.
    pub fn parse_stack_entry(entry: &str) -> Option<Frame> {
        let (loc, function) = match entry.rsplit_once(" in ") {
            Some((loc, f)) => (loc, f.to_string()),
            None => (entry, String::new()),
        };
        let (file, line) = loc.rsplit_once(':')?;
        Some(Frame {
            file: file.to_string(),
            line: line.trim().parse().ok()?,
            function,
            package: None,
            stdlib: false,
        })
    }
}

/// Everything the observer reports about one occurrence. Unknown fields are ignored and
/// missing optional ones default, so files written by other dynafold versions still merge.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Seconds since the epoch.
    #[serde(default)]
    pub time: f64,
    #[serde(default)]
    pub pid: u32,
    #[serde(default)]
    pub rank: Option<i64>,
    #[serde(default)]
    pub torch: Option<String>,
    /// Dynamo's graph-break id (`gb0007`) where torch has one, else its gb_type text or the
    /// exception class.
    pub break_type: String,
    #[serde(default)]
    pub gb_type: Option<String>,
    /// First line of the reason (Dynamo's explanation when it gives one).
    #[serde(default)]
    pub reason: String,
    /// The compiled function's own frame that led to the break.
    #[serde(default)]
    pub user_frame: Option<Frame>,
    /// The innermost traced frame, when the break is not in the compiled function itself.
    #[serde(default)]
    pub library_frame: Option<Frame>,
    /// The innermost non-stdlib frame outside the user's file (e.g. FlashInfer's
    /// `get_cuda_version` above `subprocess.py`), when it differs from `library_frame`.
    #[serde(default)]
    pub via_frame: Option<Frame>,
    /// The traced frames, outermost first, as `file:line in function` (at most 16).
    #[serde(default)]
    pub stack: Vec<String>,
    #[serde(default)]
    pub fullgraph: Option<bool>,
    #[serde(default)]
    pub hint: Option<String>,
    /// The exception class Dynamo raised (`Unsupported`, ...).
    #[serde(default)]
    pub exception: Option<String>,
    /// Which hook saw it (`graph_breaks`, `compilation_metrics`).
    #[serde(default)]
    pub source: Option<String>,
    /// Who owns the frame that broke: a package (`flashinfer`, `sglang`, `torch`, ...) or the
    /// user's own file (its path). Records of older dynafold versions have none: see `owner()`.
    #[serde(default)]
    pub owner: Option<String>,
    /// Its compile asked for fullgraph=True and survey mode carried it on past this break.
    #[serde(default)]
    pub survey: bool,
}

/// What makes two occurrences the same site.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SiteKey {
    pub break_type: String,
    /// `file:line`, empty when unknown.
    pub user_frame: String,
    /// `file:line`, empty when the break is in the compiled function itself.
    pub library_frame: String,
    pub reason: String,
}

impl Record {
    pub fn site_key(&self) -> SiteKey {
        SiteKey {
            break_type: self.break_type.clone(),
            user_frame: self
                .user_frame
                .as_ref()
                .map(Frame::location)
                .unwrap_or_default(),
            library_frame: self
                .library_frame
                .as_ref()
                .map(Frame::location)
                .unwrap_or_default(),
            reason: first_line(&self.reason).to_string(),
        }
    }

    /// The owner the observer named, or for a record without one (an older dynafold's) the
    /// package of the innermost library frame outside the standard library, else the user's
    /// file.
    pub fn owner(&self) -> String {
        if let Some(o) = self.owner.as_deref().filter(|o| !o.is_empty()) {
            return o.to_string();
        }
        [&self.via_frame, &self.library_frame]
            .into_iter()
            .flatten()
            .find(|f| !f.stdlib)
            .and_then(|f| f.package.clone())
            .or_else(|| self.user_frame.as_ref().map(|f| f.file.clone()))
            .unwrap_or_else(|| "unknown".into())
    }

    /// Every frame the record names, outermost first where known.
    pub fn frames(&self) -> Vec<Frame> {
        let mut out: Vec<Frame> = self
            .stack
            .iter()
            .filter_map(|s| Frame::parse_stack_entry(s))
            .collect();
        for f in [&self.user_frame, &self.via_frame, &self.library_frame]
            .into_iter()
            .flatten()
        {
            out.push(f.clone());
        }
        out
    }
}

pub fn first_line(s: &str) -> &str {
    s.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("")
}

/// One line of a report file: the record plus this process's running count for its site.
/// The count makes lines self-sufficient: the merge keeps, per process and site, the line
/// with the highest count, so a torn last line costs at most one occurrence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Line {
    /// Format version of the line.
    #[serde(default = "one")]
    pub v: u32,
    pub count: u64,
    /// Host name the file was written on (pids are only unique per host).
    #[serde(default)]
    pub host: String,
    #[serde(flatten)]
    pub record: Record,
}

fn one() -> u32 {
    1
}

/// The first line of every report file: the process that watched for breaks. A process
/// writes it when the observer is installed, so a run without a single break still shows
/// which processes were watching (`dynafold report` then says "no graph breaks in N
/// processes"), and an empty folder means no process watched at all.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcessLine {
    #[serde(default = "one")]
    pub v: u32,
    pub process: Process,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Process {
    pub pid: u32,
    #[serde(default)]
    pub host: String,
    /// Seconds since the epoch, when the observer was installed.
    #[serde(default)]
    pub time: f64,
}

/// A line saying that break lines are missing from its file: written by a process whose write
/// failed (a full disk) or whose earlier file was removed while it ran (`append.rs`). The
/// merge turns these into the report's "missing" lines, so a report never looks complete
/// when it is not.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GapLine {
    #[serde(default = "one")]
    pub v: u32,
    pub gap: Gap,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    /// How many break lines were not written; `None`: not known yet, lines stop here (the
    /// write failing now is the first of them).
    #[serde(default)]
    pub lost: Option<u64>,
    /// The error, as the system gave it (`No space left on device (os error 28)`).
    #[serde(default)]
    pub why: String,
    /// Seconds since the epoch.
    #[serde(default)]
    pub time: f64,
    /// The process's earlier file was removed (its folder deleted) while it ran, and this
    /// file was opened anew: what the earlier file held is gone.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub removed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            pid: 7,
            break_type: "gb0007".into(),
            reason: "Dynamo does not know how to trace the builtin `posix.stat.`\nmore".into(),
            user_frame: Some(Frame {
                file: "/m/model.py".into(),
                line: 42,
                function: "forward".into(),
                ..Frame::default()
            }),
            library_frame: Some(Frame {
                file: "<frozen genericpath>".into(),
                line: 19,
                function: "exists".into(),
                package: Some("genericpath".into()),
                stdlib: true,
            }),
            stack: vec![
                "/m/model.py:42 in forward".into(),
                "<frozen genericpath>:19 in exists".into(),
            ],
            ..Record::default()
        }
    }

    #[test]
    fn site_key_uses_locations_and_first_reason_line() {
        let k = sample().site_key();
        assert_eq!(k.user_frame, "/m/model.py:42");
        assert_eq!(k.library_frame, "<frozen genericpath>:19");
        assert_eq!(
            k.reason,
            "Dynamo does not know how to trace the builtin `posix.stat.`"
        );
    }

    #[test]
    fn observer_json_round_trips_and_tolerates_unknown_fields() {
        let json = r#"{"time": 1.5, "pid": 3, "rank": null, "torch": "2.9.1", "break_type": "gb0059",
            "gb_type": null, "reason": "print", "user_frame": {"file": "a.py", "line": 2, "function": "f"},
            "library_frame": null, "via_frame": null, "stack": [], "fullgraph": true,
            "hint": "h", "exception": "Unsupported", "source": "compilation_metrics", "new_field": 1}"#;
        let r: Record = serde_json::from_str(json).unwrap();
        assert_eq!(r.user_frame.as_ref().unwrap().location(), "a.py:2");
        assert_eq!(r.fullgraph, Some(true));
        let line = Line {
            v: 1,
            count: 2,
            host: "h".into(),
            record: r.clone(),
        };
        let back: Line = serde_json::from_str(&serde_json::to_string(&line).unwrap()).unwrap();
        assert_eq!(back.record, r);
        assert_eq!(back.count, 2);
    }

    #[test]
    fn owner_is_the_observers_else_the_innermost_library_package_else_the_users_file() {
        let mut r = sample();
        r.owner = Some("sglang".into());
        assert_eq!(r.owner(), "sglang");
        r.owner = None;
        // The library frame is the standard library's: the user's file owns the break.
        assert_eq!(r.owner(), "/m/model.py");
        r.via_frame = Some(Frame {
            file: "/sp/flashinfer/jit/cpp_ext.py".into(),
            line: 70,
            function: "get_cuda_version".into(),
            package: Some("flashinfer".into()),
            stdlib: false,
        });
        assert_eq!(r.owner(), "flashinfer");
        let old = r#"{"break_type": "gb0007", "reason": "x"}"#;
        let r: Record = serde_json::from_str(old).unwrap();
        assert_eq!(
            (r.owner.as_deref(), r.survey, r.owner()),
            (None, false, "unknown".into())
        );
    }

    #[test]
    fn stack_entries_parse_even_with_colons_in_paths() {
        let f = Frame::parse_stack_entry("C:/x/y.py:12 in <module>").unwrap();
        assert_eq!(
            (f.file.as_str(), f.line, f.function.as_str()),
            ("C:/x/y.py", 12, "<module>")
        );
        assert!(Frame::parse_stack_entry("nonsense").is_none());
        assert_eq!(sample().frames().len(), 4);
    }
}
