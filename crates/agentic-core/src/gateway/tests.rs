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
            matches!(&plan, Plan::Refuse(GatewayReason::InvalidEndpoint, _)),
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
        assert_eq!(*reason, GatewayReason::InvalidCredential);
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
        (Observation::Status(200), GatewayReason::ConnectionVerified),
        (Observation::Status(204), GatewayReason::ConnectionVerified),
        (Observation::Status(401), GatewayReason::Unauthorized),
        (Observation::Status(403), GatewayReason::Unauthorized),
        (Observation::Status(302), GatewayReason::UnexpectedStatus),
        (Observation::Status(404), GatewayReason::UnexpectedStatus),
        (Observation::Status(503), GatewayReason::UnexpectedStatus),
        (Observation::TimedOut, GatewayReason::EndpointUnreachable),
        (Observation::Unreachable, GatewayReason::EndpointUnreachable),
        (Observation::Tls, GatewayReason::TLSFailure),
    ];
    for (observation, reason) in cases {
        let first = checked(url, observation, false);
        assert_eq!(first.reachable.reason, reason, "{observation:?}");
        assert_eq!(first.ready, first.reachable, "{observation:?}");
        let ok = reason == GatewayReason::ConnectionVerified;
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
        assert_eq!(later.ready.reason, GatewayReason::ConnectionVerified);
        assert!(
            later
                .ready
                .message
                .contains(later.reachable.reason.as_str())
        );
        assert_eq!(later.reachable.status, ConditionStatus::False);
        assert!(later.connection_verified);
        assert_eq!(later.recheck_after, RECHECK_AFTER_FAILURE);
    }
    let revoked = checked(url, Observation::Status(401), true);
    assert_eq!(revoked.ready.status, ConditionStatus::False);
    assert_eq!(revoked.ready.reason, GatewayReason::Unauthorized);
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

fn at(second: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(second).expect("valid timestamp"))
}

fn secret(data: &[(&str, &str)]) -> Secret {
    Secret {
        data: Some(
            data.iter()
                .map(|(k, v)| {
                    (
                        (*k).to_string(),
                        k8s_openapi::ByteString(v.as_bytes().to_vec()),
                    )
                })
                .collect(),
        ),
        ..Secret::default()
    }
}

fn spec(key: Option<&str>) -> GatewaySpec {
    serde_json::from_value(serde_json::json!({
        "provider": "openai",
        "endpoint": "https://llm.example",
        "credentialRef": {"secretName": "llm-key", "key": key},
        "model": {"name": "m", "contextWindow": 1000},
    }))
    .expect("a Gateway spec")
}

#[test]
fn the_secret_decides_between_a_check_and_a_refusal() {
    let missing = plan_for(&spec(Some("apiKey")), "team", None);
    assert_eq!(
        missing,
        Plan::Refuse(
            GatewayReason::SecretNotFound,
            "spec.credentialRef.secretName: Secret llm-key not found in namespace team".into()
        )
    );
    let keyless = plan_for(
        &spec(Some("apiKey")),
        "team",
        Some(&secret(&[("other", "x")])),
    );
    assert!(
        matches!(&keyless, Plan::Refuse(GatewayReason::SecretKeyNotFound, m) if m.contains("no key apiKey")),
        "{keyless:?}"
    );
    let whole = plan_for(&spec(None), "team", Some(&secret(&[("apiKey", "sk-1")])));
    assert!(matches!(whole, Plan::Skip(_)), "{whole:?}");
    let Plan::Check(probe) = plan_for(
        &spec(Some("apiKey")),
        "team",
        Some(&secret(&[("apiKey", "sk-1")])),
    ) else {
        panic!("a check");
    };
    assert_eq!(probe.key.as_deref(), Some("sk-1"));
    assert!(!format!("{probe:?}").contains("sk-1"));
}

#[test]
fn a_check_is_due_when_the_last_one_expired_or_was_about_something_else() {
    let last = PreviousCheck {
        same_subject: true,
        elapsed: Duration::from_secs(100),
        recheck_after: RECHECK_AFTER_SUCCESS,
        verified: true,
    };
    let old = GatewayStatus::default();
    assert_eq!(
        due(Some(last), &old, Some(1)),
        Due::Wait(RECHECK_AFTER_SUCCESS.saturating_sub(Duration::from_secs(100)))
    );
    let expired = PreviousCheck {
        elapsed: RECHECK_AFTER_SUCCESS,
        ..last
    };
    assert_eq!(
        due(Some(expired), &old, Some(1)),
        Due::Now {
            verified_before: true
        }
    );
    let other = PreviousCheck {
        same_subject: false,
        ..last
    };
    assert_eq!(
        due(Some(other), &old, Some(1)),
        Due::Now {
            verified_before: false
        }
    );
}

#[test]
fn without_a_memory_the_status_of_this_generation_tells_whether_it_was_verified() {
    let verified = decide(
        Finding::Checked {
            url: "https://llm.example/v1/models".into(),
            observation: Observation::Status(200),
            verified_before: false,
        },
        &GatewayStatus::default(),
        Some(3),
        at(10),
    )
    .status;
    assert_eq!(
        due(None, &verified, Some(3)),
        Due::Now {
            verified_before: true
        }
    );
    assert_eq!(
        due(None, &verified, Some(4)),
        Due::Now {
            verified_before: false
        }
    );
}

#[test]
fn a_decision_sets_both_conditions_and_remembers_the_check() {
    let url = "https://llm.example/v1/models";
    let first = decide(
        Finding::Checked {
            url: url.into(),
            observation: Observation::Status(200),
            verified_before: false,
        },
        &GatewayStatus::default(),
        Some(1),
        at(10),
    );
    assert!(first.status.connection_verified);
    assert_eq!(first.status.observed_generation, Some(1));
    let reasons: Vec<(&str, &str)> = first
        .status
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.reason.as_str()))
        .collect();
    assert_eq!(
        reasons,
        [
            ("EndpointReachable", "ConnectionVerified"),
            ("Ready", "ConnectionVerified")
        ]
    );
    assert_eq!(first.recheck_after, Some(RECHECK_AFTER_SUCCESS));
    assert_eq!(
        first.memory,
        Memory::Record {
            verified: true,
            recheck_after: RECHECK_AFTER_SUCCESS
        }
    );

    // An outage later keeps Ready (and its transition time), EndpointReachable turns False.
    let outage = decide(
        Finding::Checked {
            url: url.into(),
            observation: Observation::Unreachable,
            verified_before: true,
        },
        &first.status,
        Some(1),
        at(20),
    );
    let ready =
        crate::conditions::find_condition(&outage.status.conditions, "Ready").expect("Ready");
    assert_eq!(
        (ready.status.as_str(), ready.last_transition_time.clone()),
        ("True", at(10))
    );
    let reachable =
        crate::conditions::find_condition(&outage.status.conditions, "EndpointReachable")
            .expect("EndpointReachable");
    assert_eq!(
        (reachable.status.as_str(), reachable.reason.as_str()),
        ("False", "EndpointUnreachable")
    );
    assert_eq!(outage.recheck_after, Some(RECHECK_AFTER_FAILURE));
}

#[test]
fn a_refusal_or_a_skip_drops_the_check_and_a_pass_before_the_recheck_changes_nothing() {
    let checked = decide(
        Finding::Checked {
            url: "https://llm.example/v1/models".into(),
            observation: Observation::Status(200),
            verified_before: false,
        },
        &GatewayStatus::default(),
        Some(1),
        at(10),
    );
    let waiting = decide(
        Finding::NotDue(Duration::from_secs(30)),
        &checked.status,
        Some(1),
        at(40),
    );
    assert_eq!(waiting.status, checked.status);
    assert_eq!(waiting.recheck_after, Some(Duration::from_secs(30)));
    assert_eq!(waiting.memory, Memory::Keep);

    let refused = decide(
        Finding::Refused(GatewayReason::SecretNotFound, "gone".into()),
        &checked.status,
        Some(2),
        at(50),
    );
    assert!(!refused.status.connection_verified);
    assert_eq!(refused.memory, Memory::Forget);
    assert_eq!(refused.recheck_after, None);
    let types: Vec<(&str, &str, &str)> = refused
        .status
        .conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
        .collect();
    assert_eq!(types, [("Ready", "False", "SecretNotFound")]);

    let skipped = decide(
        Finding::Skipped("cloud-signed".into()),
        &refused.status,
        Some(3),
        at(60),
    );
    let ready = &skipped.status.conditions[0];
    assert_eq!(
        (
            ready.status.as_str(),
            ready.reason.as_str(),
            ready.observed_generation
        ),
        ("True", "VerificationSkipped", Some(3))
    );
    assert_eq!(skipped.memory, Memory::Forget);
}
