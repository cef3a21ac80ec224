//! Rendering a `prompt-template` package on its own, outside any actor run
//! (MCP's `prompts/get` serves installed ones): the template sees only
//! `input`, and is bounded exactly as an actor step's templates are, by the
//! same [`Engine`]: first in place with the quick slice of fuel and bytes,
//! then, if that is not enough, with the full limits on a render thread in
//! the memory-capped child (`isolate.rs`), until `deadline`.

use std::sync::Arc;

use serde_json::Value;

use super::limits::Engine;
use super::templates::{Problem, Renderer, Scope};
use crate::ir::Template;

/// Renders `source` with `input` as its `input`. A template that is wrong
/// for the input (an undefined name) is [`Problem::Invalid`]; one that runs
/// out of fuel, bytes, memory or time is [`Problem::Limit`].
pub async fn render_document(
    engine: &Arc<Engine>,
    source: Arc<str>,
    input: Value,
    deadline: tokio::time::Instant,
) -> Result<String, Problem> {
    let scope = Scope::new(input);
    let template = Template::Text(source.to_string());
    let quick = Renderer::standalone(engine, &scope, true).text(&template);
    match quick {
        Err(Problem::Limit(_)) => {
            let job = engine.render_isolated(deadline, move |engine| {
                let mut renderer = Renderer::standalone(engine, &scope, false);
                let result = renderer.text(&template);
                (result, renderer.bytes)
            });
            match job.await {
                Some((result, _bytes)) => result,
                None => Err(Problem::Limit("it ran past its time limit".into())),
            }
        }
        done => done,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::limits::RunLimits;
    use serde_json::json;
    use std::time::Duration;

    fn engine() -> Arc<Engine> {
        Arc::new(Engine::new(RunLimits::default(), 1))
    }

    fn soon() -> tokio::time::Instant {
        tokio::time::Instant::now() + Duration::from_secs(20)
    }

    #[tokio::test]
    async fn renders_its_input_and_fails_on_what_is_missing() {
        let engine = engine();
        let text = render_document(&engine, "Hi {{ input.name }}".into(), json!({"name": "Ada"}), soon())
            .await
            .unwrap();
        assert_eq!(text, "Hi Ada");
        let missing = render_document(&engine, "Hi {{ input.name }}".into(), json!({}), soon()).await;
        assert!(matches!(missing, Err(Problem::Invalid(_))), "{missing:?}");
        // A package names no actor's prompts.
        let steps = render_document(&engine, "{{ steps.a.output }}".into(), json!({}), soon()).await;
        assert!(matches!(steps, Err(Problem::Invalid(_))), "{steps:?}");
    }

    #[tokio::test]
    async fn a_hostile_template_hits_a_limit_in_bounded_time() {
        let engine = engine();
        let spin = "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}";
        let hog = "{{ '' ~ (['A' * 1000000] * 100000) }}";
        for hostile in [spin, hog] {
            let started = std::time::Instant::now();
            let outcome = render_document(&engine, hostile.into(), json!({}), soon()).await;
            assert!(matches!(outcome, Err(Problem::Limit(_))), "{hostile}: {outcome:?}");
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "{hostile}: {:?}",
                started.elapsed()
            );
        }
        let fine = render_document(&engine, "{{ input.x }}!".into(), json!({"x": "ok"}), soon()).await;
        assert_eq!(fine.unwrap(), "ok!");
    }
}
