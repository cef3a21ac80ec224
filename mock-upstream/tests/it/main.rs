//! The mock upstream's tests, linked into one binary: each module serves the
//! mock on its own `127.0.0.1:0` port and drives one provider's protocol.

mod anthropic;
mod azure;
mod bedrock;
mod cohere;
mod gemini;
mod mock_upstream;
mod stripe;
mod stripe_subscriptions;
