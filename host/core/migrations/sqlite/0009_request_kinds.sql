-- Tool calls and skill runs are logged beside chat requests (docs/components.md):
-- `kind` says which a row records; `parent_request_id` links a nested request
-- (a skill's model or tool call) to the one it ran inside.
ALTER TABLE request_log ADD COLUMN kind TEXT NOT NULL DEFAULT 'chat';
ALTER TABLE request_log ADD COLUMN parent_request_id TEXT;
