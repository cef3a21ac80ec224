//! Compile errors: each names a 1-based line and column of the YAML source
//! (and, from [`super::compile_file`], the file it is in).

use std::fmt;

/// A position in the YAML source, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Location {
    pub line: u32,
    pub column: u32,
}

impl Location {
    pub fn new(line: u32, column: u32) -> Self {
        // serde-saphyr reports 0:0 for positions it does not know; point at
        // the document's start rather than at an impossible place.
        Self {
            line: line.max(1),
            column: column.max(1),
        }
    }
}

impl Location {
    pub(crate) fn from_u64(line: u64, column: u64) -> Self {
        let narrow = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Self::new(narrow(line), narrow(column))
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError {
    /// The file, when the source came from one.
    pub file: Option<String>,
    pub line: u32,
    pub column: u32,
    pub message: String,
}

impl CompileError {
    pub fn at(location: Location, message: impl Into<String>) -> Self {
        Self {
            file: None,
            line: location.line,
            column: location.column,
            message: message.into(),
        }
    }

    pub fn location(&self) -> Location {
        Location::new(self.line, self.column)
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{file}:")?;
        }
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for CompileError {}

/// One or more compile errors, in source order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileErrors(Vec<CompileError>);

impl CompileErrors {
    pub fn one(error: CompileError) -> Self {
        Self(vec![error])
    }

    /// `Err` with `errors` sorted by position, unless there are none.
    pub fn check(mut errors: Vec<CompileError>) -> Result<(), Self> {
        if errors.is_empty() {
            return Ok(());
        }
        errors.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
        errors.dedup();
        Err(Self(errors))
    }

    pub fn errors(&self) -> &[CompileError] {
        &self.0
    }

    pub fn into_vec(self) -> Vec<CompileError> {
        self.0
    }

    /// Names `file` on every error that does not name one yet.
    pub fn in_file(mut self, file: &str) -> Self {
        for error in &mut self.0 {
            error.file.get_or_insert_with(|| file.to_string());
        }
        self
    }
}

impl fmt::Display for CompileErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, error) in self.0.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CompileErrors {}

impl From<CompileError> for CompileErrors {
    fn from(error: CompileError) -> Self {
        Self::one(error)
    }
}
