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

/// What a [`StreamFault`] left of a stream: whether the connection drops
/// after the kept events, and whether the protocol's error event follows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cut {
    pub abort: bool,
    pub error: bool,
}

impl StreamFault {
    /// Whether a non-streamed answer is cut (head sent, body aborted).
    pub fn cuts_whole_answer(self) -> bool {
        matches!(self, StreamFault::CutAfter(_) | StreamFault::EndAfter(_))
    }

    /// Cuts `events` as the fault asks, for a protocol whose first `opening`
    /// events come before any content and whose last event is its terminal
    /// one. The OpenAI route's counts include its role chunk, so `n` frames
    /// there are the opening events and `n - 1` content events here; a fault
    /// never keeps the terminal event.
    pub fn cut<T>(self, events: &mut Vec<T>, opening: usize) -> Cut {
        let n = match self {
            StreamFault::None => return Cut::default(),
            StreamFault::CutAfter(n) | StreamFault::ErrorAfter(n) | StreamFault::EndAfter(n) => n,
        };
        let keep = (opening + n.saturating_sub(1)).min(events.len().saturating_sub(1));
        events.truncate(keep);
        Cut {
            abort: matches!(self, StreamFault::CutAfter(_)),
            error: matches!(self, StreamFault::ErrorAfter(_)),
        }
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

    #[test]
    fn a_cut_keeps_the_opening_and_never_the_terminal_event() {
        let events = || (0..10).collect::<Vec<u32>>();
        let mut cut = events();
        assert_eq!(
            StreamFault::CutAfter(3).cut(&mut cut, 2),
            Cut {
                abort: true,
                error: false
            }
        );
        assert_eq!(cut, [0, 1, 2, 3], "the opening two, then two of content");
        let mut errored = events();
        assert!(StreamFault::ErrorAfter(1).cut(&mut errored, 2).error);
        assert_eq!(errored, [0, 1]);
        let mut ended = events();
        assert_eq!(StreamFault::EndAfter(50).cut(&mut ended, 2), Cut::default());
        assert_eq!(ended.len(), 9, "everything but the terminal event");
        let mut whole = events();
        assert_eq!(StreamFault::None.cut(&mut whole, 2), Cut::default());
        assert_eq!(whole.len(), 10);
    }
}
