//! Placeholder until the hostile guardrail is written.
