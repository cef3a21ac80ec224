//! The `config` capability: an install's settings, read-only. Secrets are not
//! settings: they are credentials the host places on requests (see `http`).

use crate::bindings::tool_server::tollgate::host::config::Host;
use crate::state::CallState;

impl Host for CallState {
    fn get(&mut self, key: String) -> Option<String> {
        self.grants.config.get(&key).cloned()
    }
}
