//! The built-in summarize skill with stand-in capabilities: its model call
//! reaches the host's `models` capability once, with the caller's model, and a
//! model error (an empty wallet's 402) comes back as the skill's error.

use std::sync::{Arc, Mutex};

use futures_util::future::BoxFuture;
use serde_json::{Value, json};
use tollgate_components::{CallError, Capabilities, ModelAccess, ModelError, SkillError};

use crate::{grants, host, invocation};

/// Answers every chat with `answer` (or fails with `error`), recording requests.
struct StandIn {
    answer: Result<Value, ModelError>,
    requests: Mutex<Vec<Value>>,
}

impl ModelAccess for StandIn {
    fn chat(&self, request: String) -> BoxFuture<'static, Result<String, ModelError>> {
        self.requests
            .lock()
            .unwrap()
            .push(serde_json::from_str(&request).unwrap());
        let answer = self.answer.clone().map(|value| value.to_string());
        Box::pin(async move { answer })
    }
}

fn stand_in(answer: Result<Value, ModelError>) -> Arc<StandIn> {
    Arc::new(StandIn {
        answer,
        requests: Mutex::new(Vec::new()),
    })
}

async fn summarize() -> (Arc<tollgate_components::Skill>, tempfile::TempDir) {
    let (host, cache) = host(Default::default());
    let bytes = tollgate_plugin_host::builtin_skills()
        .iter()
        .find(|builtin| builtin.name == "summarize")
        .expect("summarize is built in")
        .bytes;
    let skill = tokio::task::spawn_blocking(move || host.load_skill("summarize", bytes))
        .await
        .unwrap()
        .unwrap();
    (skill, cache)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summarize_calls_the_model_once_and_answers_the_summary() {
    let (skill, _cache) = summarize().await;
    assert_eq!(skill.spec().name, "summarize");
    assert_eq!(skill.spec().input_schema["required"], json!(["text", "model"]));

    let models = stand_in(Ok(json!({
        "choices": [{"message": {"role": "assistant", "content": " A short summary. "}}]
    })));
    let capabilities = Capabilities {
        models: Some(models.clone()),
        tools: None,
    };
    let input = json!({"text": "A long text about many things.", "model": "mock/echo", "max_words": 10});
    let output = skill
        .run(invocation("summarize"), grants(), capabilities, input.to_string())
        .await
        .unwrap();
    assert_eq!(output, json!({"summary": "A short summary."}));
    let requests = models.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["model"], "mock/echo");
    assert!(
        requests[0]["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("at most 10 words")
    );
    assert_eq!(requests[0]["messages"][1]["content"], "A long text about many things.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_error_and_bad_input_come_back_as_skill_errors() {
    let (skill, _cache) = summarize().await;
    let empty_wallet = ModelError {
        status: 402,
        code: "insufficient_balance".into(),
        message: "the wallet cannot cover this call".into(),
    };
    let capabilities = Capabilities {
        models: Some(stand_in(Err(empty_wallet.clone()))),
        tools: None,
    };
    let input = json!({"text": "words", "model": "mock/echo"}).to_string();
    match skill
        .run(invocation("summarize"), grants(), capabilities.clone(), input)
        .await
    {
        Err(CallError::Skill(SkillError::Model(error))) => assert_eq!(error, empty_wallet),
        other => panic!("expected the model error, got {other:?}"),
    }
    match skill
        .run(
            invocation("summarize"),
            grants(),
            capabilities.clone(),
            r#"{"text": 3}"#.into(),
        )
        .await
    {
        Err(CallError::Skill(SkillError::InvalidInput(message))) => {
            assert!(message.contains("invalid input"), "{message}")
        }
        other => panic!("expected invalid input, got {other:?}"),
    }
    // Without the models capability, the call is refused by the host.
    match skill
        .run(
            invocation("summarize"),
            grants(),
            Capabilities::default(),
            json!({"text": "t", "model": "m"}).to_string(),
        )
        .await
    {
        Err(CallError::Skill(SkillError::Model(error))) => assert_eq!(error.code, "capability_not_granted"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}
