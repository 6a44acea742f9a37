use super::*;

fn probe(plan: Plan) -> Probe {
    match plan {
        Plan::Check(probe) => probe,
        other => panic!("expected a check, got {other:?}"),
    }
}

#[test]
fn bearer_by_default_and_anthropic_headers_by_provider() {
    let openai = probe(plan(
        "openai",
        Some("https://llm.example.com"),
        Credential::Key(b"sk-1"),
    ));
    assert_eq!(openai.url, "https://llm.example.com/v1/models");
    assert_eq!(
        openai.headers,
        vec![("authorization", "Bearer sk-1".to_string())]
    );

    let anthropic = probe(plan(
        "Anthropic",
        Some("https://api.anthropic.com/"),
        Credential::Key(b"sk-ant"),
    ));
    assert_eq!(anthropic.url, "https://api.anthropic.com/v1/models");
    assert_eq!(
        anthropic.headers,
        vec![
            ("x-api-key", "sk-ant".to_string()),
            ("anthropic-version", ANTHROPIC_VERSION.to_string()),
        ]
    );

    let keyless = probe(plan(
        "ollama",
        Some("http://ollama:11434"),
        Credential::None,
    ));
    assert!(keyless.headers.is_empty(), "no empty bearer token is sent");
}

#[test]
fn cloud_signed_providers_whole_secrets_and_missing_endpoints_are_skipped() {
    for provider in [
        "gcp-vertex-ai",
        "gcp_vertex_ai",
        "aws-bedrock",
        "AWS_BEDROCK",
    ] {
        let plan = plan(provider, Some("https://x.example"), Credential::Key(b"k"));
        assert!(
            matches!(&plan, Plan::Skip(m) if m.contains(provider)),
            "{provider}: {plan:?}"
        );
    }
    assert!(matches!(
        plan("openai", None, Credential::Key(b"k")),
        Plan::Skip(_)
    ));
    assert!(matches!(
        plan("openai", Some("https://x.example"), Credential::WholeSecret),
        Plan::Skip(m) if m.contains("credentialRef has no key")
    ));
}

#[test]
fn the_models_path_is_appended_once() {
    assert_eq!(
        models_url("https://api.openai.com/v1").as_deref(),
        Ok("https://api.openai.com/v1/models")
    );
    assert_eq!(
        models_url("http://gw.local/proxy/v1/").as_deref(),
        Ok("http://gw.local/proxy/v1/models")
    );
    assert_eq!(
        models_url("HTTP://gw.local:8080").as_deref(),
        Ok("HTTP://gw.local:8080/v1/models")
    );
}

#[test]
fn endpoints_that_would_change_what_is_checked_are_refused() {
    for endpoint in [
        "ftp://x.example",
        "x.example",
        "https://",
        "https://user:pw@x.example",
        "https://x.example/?next=",
        "https://x.example/#",
        "https://x.example/a b",
        "https://x.example/\n",
    ] {
        let plan = plan("openai", Some(endpoint), Credential::None);
        assert!(
            matches!(&plan, Plan::Refuse(REASON_INVALID_ENDPOINT, _)),
            "{endpoint:?}: {plan:?}"
        );
    }
}

#[test]
fn keys_that_cannot_be_a_header_are_refused_without_showing_them() {
    for key in [&b"sk-1\n"[..], b"", b"\xff\xfe"] {
        let plan = plan("openai", Some("https://x.example"), Credential::Key(key));
        let Plan::Refuse(reason, message) = &plan else {
            panic!("{plan:?}");
        };
        assert_eq!(*reason, REASON_INVALID_CREDENTIAL);
        assert!(!message.contains("sk-1"), "{message}");
    }
}

#[test]
fn debug_output_never_shows_the_key() {
    let plan = plan(
        "openai",
        Some("https://x.example"),
        Credential::Key(b"sk-very-secret"),
    );
    let shown = format!("{plan:?}");
    assert!(!shown.contains("sk-very-secret"), "{shown}");
    assert!(shown.contains("authorization"), "{shown}");
}

#[test]
fn answers_map_to_reasons() {
    let url = "https://x.example/v1/models";
    let cases = [
        (Observation::Status(200), REASON_CONNECTION_VERIFIED),
        (Observation::Status(204), REASON_CONNECTION_VERIFIED),
        (Observation::Status(401), REASON_UNAUTHORIZED),
        (Observation::Status(403), REASON_UNAUTHORIZED),
        (Observation::Status(302), REASON_UNEXPECTED_STATUS),
        (Observation::Status(404), REASON_UNEXPECTED_STATUS),
        (Observation::Status(503), REASON_UNEXPECTED_STATUS),
        (Observation::TimedOut, REASON_ENDPOINT_UNREACHABLE),
        (Observation::Unreachable, REASON_ENDPOINT_UNREACHABLE),
        (Observation::Tls, REASON_TLS_FAILURE),
    ];
    for (observation, reason) in cases {
        let first = checked(url, observation, false);
        assert_eq!(first.reachable.reason, reason, "{observation:?}");
        assert_eq!(first.ready, first.reachable, "{observation:?}");
        let ok = reason == REASON_CONNECTION_VERIFIED;
        assert_eq!(first.connection_verified, ok, "{observation:?}");
        assert_eq!(
            first.recheck_after,
            if ok {
                RECHECK_AFTER_SUCCESS
            } else {
                RECHECK_AFTER_FAILURE
            }
        );
        assert!(first.reachable.message.contains(url));
    }
}

#[test]
fn an_outage_after_a_success_keeps_ready_but_a_refused_key_does_not() {
    let url = "https://x.example/v1/models";
    for outage in [
        Observation::TimedOut,
        Observation::Unreachable,
        Observation::Tls,
        Observation::Status(502),
    ] {
        let later = checked(url, outage, true);
        assert_eq!(later.ready.status, ConditionStatus::True, "{outage:?}");
        assert_eq!(later.ready.reason, REASON_CONNECTION_VERIFIED);
        assert!(later.ready.message.contains(later.reachable.reason));
        assert_eq!(later.reachable.status, ConditionStatus::False);
        assert!(later.connection_verified);
        assert_eq!(later.recheck_after, RECHECK_AFTER_FAILURE);
    }
    let revoked = checked(url, Observation::Status(401), true);
    assert_eq!(revoked.ready.status, ConditionStatus::False);
    assert_eq!(revoked.ready.reason, REASON_UNAUTHORIZED);
    assert!(!revoked.connection_verified);
}

#[test]
fn logged_bodies_are_bounded_and_scrubbed() {
    let body = b"{\"error\": \"invalid key sk-abc123\"}\n";
    let shown = scrubbed(body, Some("sk-abc123"));
    assert_eq!(shown, "{\"error\": \"invalid key [redacted]\"} ");

    let long = "x".repeat(2 * MAX_LOGGED_BODY_BYTES);
    assert_eq!(scrubbed(long.as_bytes(), None).len(), MAX_LOGGED_BODY_BYTES);

    // A body cut off in the middle of the key does not keep its first part.
    let cut = format!("{}sk-abc", "y".repeat(MAX_LOGGED_BODY_BYTES - 6));
    let shown = scrubbed(cut.as_bytes(), Some("sk-abc123"));
    assert!(!shown.contains("sk-abc"), "{shown}");
}
