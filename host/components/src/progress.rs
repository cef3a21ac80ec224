//! The `progress` capability (tool WIT 0.2.0 and 0.3.0): a tool server reports how far
//! its call has got, and the report goes to the call's
//! [`ProgressSink`](crate::ProgressSink) when it has one (an MCP client that
//! sent a `progressToken`); otherwise it is dropped. A report must be finite
//! and greater than the call's last (MCP requires progress to increase), and
//! a call may make at most `max_log_lines` of them.

use crate::bindings::tool_server_v2::tollgate::tool::progress::Host;
use crate::bindings::tool_server_v3::tollgate::tool::progress::Host as HostV3;
use crate::state::CallState;

/// Longest message kept, in bytes; the rest is cut.
const MAX_MESSAGE: usize = 1024;

impl Host for CallState {
    fn report(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        let Some(sink) = &self.invocation.progress else { return };
        if !progress.is_finite() || self.last_progress.is_some_and(|last| progress <= last) {
            return;
        }
        if self.progress_reports >= self.limits.max_log_lines {
            return;
        }
        self.progress_reports += 1;
        self.last_progress = Some(progress);
        let message = message.map(|mut message| {
            let mut end = message.len().min(MAX_MESSAGE);
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message
        });
        // The receiver is gone when the client stopped listening.
        let _ = sink.send(crate::Progress {
            progress,
            total: total.filter(|total| total.is_finite()),
            message,
        });
    }
}

impl HostV3 for CallState {
    fn report(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        Host::report(self, progress, total, message)
    }
}

/// The 0.2.0 `types` interface has no functions; the linker still wants its host.
impl crate::bindings::tool_server_v2::tollgate::tool::types::Host for CallState {}
