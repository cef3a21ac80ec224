-- Tasks stored before the task store redacted secrets may hold a minted key or
-- an install's credential value in clear text. They cannot be redacted in SQL
-- on both backends, so they go: a task is a record of a finished operation,
-- not the operation's state.
DELETE FROM a2a_tasks WHERE task LIKE '%tg_live_%' OR task LIKE '%"credentials"%';
