//! Resolves body directives, fault-scripting model names and the global
//! latency into one plan, so protocol modules only execute it.

use std::time::Duration;

use axum::http::StatusCode;

use crate::directives::Directives;

/// How a stream ends early, if at all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StreamFault {
    #[default]
    None,
    /// Send this many frames, then drop the connection (no terminator).
    CutAfter(usize),
    /// Send this many frames, then an error frame, then end (no terminator).
    ErrorAfter(usize),
    /// Send this many frames, then end the body cleanly with no terminal
    /// event: what a proxy that closes an idle or long connection gracefully
    /// delivers, and what only the protocol's own terminal event tells apart
    /// from a finished answer.
    EndAfter(usize),
}

impl StreamFault {
    /// Whether a non-streamed answer is cut (head sent, body aborted).
    pub fn cuts_whole_answer(self) -> bool {
        matches!(self, StreamFault::CutAfter(_) | StreamFault::EndAfter(_))
    }
}

#[derive(Debug, Default)]
pub struct Faults {
    /// Answer with this error status instead of a completion.
    pub status: Option<StatusCode>,
    /// Delay before the response head.
    pub latency: Duration,
    /// Delay between stream frames.
    pub chunk_delay: Duration,
    pub stream: StreamFault,
}

impl Faults {
    /// Body directives win over model-name faults; latencies add up. The
    /// global latency is not part of the plan: handlers sleep it before
    /// parsing, so it applies even to requests that fail to parse.
    pub fn resolve(directives: &Directives, model: &str) -> Self {
        let by_name = ModelFault::parse(model);
        let status = directives
            .status
            .filter(|s| *s >= 400)
            .or(match by_name {
                ModelFault::Fail(status) => Some(status),
                _ => None,
            })
            .map(|s| StatusCode::from_u16(s).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
        let name_latency = match by_name {
            ModelFault::Slow(ms) => ms,
            _ => 0,
        };
        let stream = if let Some(n) = directives.cut_after {
            StreamFault::CutAfter(n)
        } else if let Some(n) = directives.stream_error_after {
            StreamFault::ErrorAfter(n)
        } else if let Some(n) = directives.eof_after {
            StreamFault::EndAfter(n)
        } else if let ModelFault::Cut(n) = by_name {
            // `cut-<n>` counts content chunks: the role chunk comes first.
            StreamFault::CutAfter(n.saturating_add(1))
        } else if let ModelFault::EndAfter(n) = by_name {
            StreamFault::EndAfter(n.saturating_add(1))
        } else if let ModelFault::RateLimitAfter(n) = by_name {
            StreamFault::ErrorAfter(n.saturating_add(1))
        } else {
            StreamFault::None
        };
        Self {
            status,
            latency: Duration::from_millis(directives.latency_ms.unwrap_or(0).saturating_add(name_latency)),
            chunk_delay: Duration::from_millis(directives.chunk_delay_ms.unwrap_or(0)),
            stream,
        }
    }
}

/// Faults scripted by the model name, so fallback candidates can differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ModelFault {
    None,
    Fail(u16),
    Cut(usize),
    /// `eof-<n>`: n content chunks, then a clean end with no terminal event.
    EndAfter(usize),
    /// `ratelimit-<n>`: n content chunks, then a rate-limit error frame.
    RateLimitAfter(usize),
    Slow(u64),
}

impl ModelFault {
    fn parse(model: &str) -> Self {
        let parsed = if let Some(rest) = model.strip_prefix("fail-") {
            rest.parse().ok().filter(|s| *s >= 400).map(Self::Fail)
        } else if let Some(rest) = model.strip_prefix("cut-") {
            rest.parse().ok().map(Self::Cut)
        } else if let Some(rest) = model.strip_prefix("eof-") {
            rest.parse().ok().map(Self::EndAfter)
        } else if let Some(rest) = model.strip_prefix("ratelimit-") {
            rest.parse().ok().map(Self::RateLimitAfter)
        } else if let Some(rest) = model.strip_prefix("slow-") {
            rest.parse().ok().map(Self::Slow)
        } else {
            None
        };
        parsed.unwrap_or(Self::None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names() {
        assert_eq!(ModelFault::parse("fail-429"), ModelFault::Fail(429));
        assert_eq!(ModelFault::parse("cut-3"), ModelFault::Cut(3));
        assert_eq!(ModelFault::parse("eof-4"), ModelFault::EndAfter(4));
        assert_eq!(ModelFault::parse("slow-20"), ModelFault::Slow(20));
        assert_eq!(ModelFault::parse("ratelimit-5"), ModelFault::RateLimitAfter(5));
        assert_eq!(ModelFault::parse("small"), ModelFault::None);
        assert_eq!(ModelFault::parse("fail-x"), ModelFault::None);
    }

    #[test]
    fn directives_win_and_latencies_add() {
        let d = Directives {
            status: Some(503),
            latency_ms: Some(5),
            ..Default::default()
        };
        let f = Faults::resolve(&d, "slow-10");
        assert_eq!(f.status, Some(StatusCode::SERVICE_UNAVAILABLE));
        assert_eq!(f.latency, Duration::from_millis(15));
        let f = Faults::resolve(&Directives::default(), "cut-2");
        assert_eq!(f.stream, StreamFault::CutAfter(3));
        let f = Faults::resolve(&Directives::default(), "eof-2");
        assert_eq!(f.stream, StreamFault::EndAfter(3));
        let d = Directives {
            eof_after: Some(5),
            ..Default::default()
        };
        assert_eq!(Faults::resolve(&d, "small").stream, StreamFault::EndAfter(5));
    }
}
