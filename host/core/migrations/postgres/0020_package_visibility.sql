-- Who may read a package (registry/src/visibility.rs): 'public' (everyone) or
-- 'private' (the workspace owning its namespace). Packages published before
-- keep what they had: public. Actors published from now on default to private.
ALTER TABLE registry_packages ADD COLUMN visibility TEXT NOT NULL DEFAULT 'public';
