-- A guardrail install's placement (routes, keys, models, order, mode) as JSON;
-- NULL for tool servers and skills.
ALTER TABLE component_installs ADD COLUMN guardrail TEXT;
