//! Multi-row inserts for the writer's commits: a batch of rows goes in runs
//! of a few fixed sizes (largest first), each size one statement prepared once
//! per connection, instead of one statement per row (each a prepare-bind-step
//! on SQLite, and a round trip to the server on Postgres).

use tollgate_core::db::Backend;

/// Rows per statement, largest first.
const SIZES: [usize; 6] = [32, 16, 8, 4, 2, 1];

/// `INSERT INTO {table} ({columns}) VALUES …` for every size in [`SIZES`],
/// for both backends. Keep one in a `LazyLock`.
pub(crate) struct BatchInsert {
    sqlite: Vec<String>,
    postgres: Vec<String>,
}

impl BatchInsert {
    /// `width` is the number of `columns`; `tail` follows the values (an
    /// `ON CONFLICT` clause).
    pub(crate) fn new(table: &str, columns: &str, width: usize, tail: &str) -> Self {
        let statements = |backend| -> Vec<String> {
            SIZES
                .iter()
                .map(|&rows| sql(backend, table, columns, width, rows, tail))
                .collect()
        };
        Self {
            sqlite: statements(Backend::Sqlite),
            postgres: statements(Backend::Postgres),
        }
    }

    /// Splits `rows` into runs of [`SIZES`], each with the statement that
    /// inserts it on `backend`.
    pub(crate) fn runs<'s, 'r, T>(
        &'s self,
        backend: Backend,
        mut rows: &'r [T],
    ) -> impl Iterator<Item = (&'s str, &'r [T])> {
        let statements = match backend {
            Backend::Sqlite => &self.sqlite,
            Backend::Postgres => &self.postgres,
        };
        std::iter::from_fn(move || {
            let index = SIZES.iter().position(|&size| size <= rows.len())?;
            let (run, rest) = rows.split_at(SIZES[index]);
            rows = rest;
            Some((statements[index].as_str(), run))
        })
    }
}

/// SQLite gets anonymous `?`s: binding a numbered `$N` there means looking
/// its name up (`sqlite3_bind_parameter_name` scans the statement's list of
/// names), which made a 32-row log insert (960 parameters) cost more than the
/// insert itself. Anonymous ones have no names to scan.
fn sql(backend: Backend, table: &str, columns: &str, width: usize, rows: usize, tail: &str) -> String {
    let values: Vec<String> = (0..rows)
        .map(|row| {
            let placeholders: Vec<String> = (1..=width)
                .map(|i| match backend {
                    Backend::Sqlite => "?".to_string(),
                    Backend::Postgres => format!("${}", row * width + i),
                })
                .collect();
            format!("({})", placeholders.join(", "))
        })
        .collect();
    format!("INSERT INTO {table} ({columns}) VALUES {} {tail}", values.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_split_into_few_prepared_sizes() {
        let insert = BatchInsert::new("t", "a, b", 2, "ON CONFLICT DO NOTHING");
        let sizes = |n: usize| {
            let items = vec![0; n];
            insert
                .runs(Backend::Sqlite, &items)
                .map(|(_, run)| run.len())
                .collect::<Vec<_>>()
        };
        assert_eq!(sizes(0), Vec::<usize>::new());
        assert_eq!(sizes(1), vec![1]);
        assert_eq!(sizes(15), vec![8, 4, 2, 1]);
        assert_eq!(sizes(70), vec![32, 32, 4, 2]);
        let two = [0, 0];
        let (postgres, _) = insert.runs(Backend::Postgres, &two).next().unwrap();
        assert_eq!(
            postgres,
            "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4) ON CONFLICT DO NOTHING"
        );
        let (sqlite, _) = insert.runs(Backend::Sqlite, &two).next().unwrap();
        assert_eq!(
            sqlite,
            "INSERT INTO t (a, b) VALUES (?, ?), (?, ?) ON CONFLICT DO NOTHING"
        );
    }
}
