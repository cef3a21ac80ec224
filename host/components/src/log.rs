//! The `log` capability: a component's log lines become events in the calling
//! request's trace, tagged with the install and request id, and go to the
//! call's [`LogSink`](crate::LogSink) when it has one (an MCP client's log
//! notifications). Lines are capped in length and number per call, so a
//! chatty component cannot flood the log or the client.

use crate::bindings::tool_server::tollgate::host::log::{Host, Level};
use crate::state::CallState;

/// Longest line kept, in bytes; the rest is cut.
const MAX_LINE: usize = 2048;

impl Host for CallState {
    fn log(&mut self, level: Level, message: String) {
        self.log_lines += 1;
        if self.log_lines > self.limits.max_log_lines {
            if self.log_lines == self.limits.max_log_lines + 1 {
                tracing::warn!(
                    install = %self.invocation.install,
                    request_id = %self.invocation.request_id,
                    "component log limit reached ({} lines); later lines are dropped",
                    self.limits.max_log_lines
                );
            }
            return;
        }
        let mut end = message.len().min(MAX_LINE);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let line = &message[..end];
        if let Some(sink) = &self.invocation.logs {
            let level = match level {
                Level::Debug => "debug",
                Level::Info => "info",
                Level::Warn => "warning",
                Level::Error => "error",
            };
            // The receiver is gone when the client stopped listening.
            let _ = sink.send(crate::LogLine {
                level,
                message: line.to_string(),
            });
        }
        let (install, request_id) = (&self.invocation.install, &self.invocation.request_id);
        match level {
            Level::Debug => tracing::debug!(target: "tollgate::component", %install, %request_id, "{line}"),
            Level::Info => tracing::info!(target: "tollgate::component", %install, %request_id, "{line}"),
            Level::Warn => tracing::warn!(target: "tollgate::component", %install, %request_id, "{line}"),
            Level::Error => tracing::error!(target: "tollgate::component", %install, %request_id, "{line}"),
        }
    }
}
