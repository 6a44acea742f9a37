//! What the integration tests (`tests/`) and the bench (`bench/`) put on a test control
//! plane from `agentic-testenv`: skill folders packed and pushed to its registry, a fake LLM
//! endpoint and the Gateway that points at it, objects applied as a user would, the command
//! that runs the operator binary against it, and the spans an agent reports to its receiver.
//!
//! Every helper returns its failure, naming what it was doing; the tests' own wrappers in
//! `agentic-integration-tests` turn it into a panic, the bench into its error.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

use agentic_api::{CredentialRef, Gateway, GatewayModel, GatewaySpec};
use agentic_oci::{RegistryAuth, RegistryOptions};
use agentic_otlp::common::v1::{AnyValue, KeyValue, any_value::Value};
use agentic_otlp::trace::v1::Span;
use agentic_testenv::TestEnv;
use anyhow::Context as _;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// The field manager of [`apply`]: a user with `kubectl apply`, not the operator.
pub const FIELD_MANAGER: &str = "integration-test";

/// Applies `object` (server-side, forced) as [`FIELD_MANAGER`], as a user would with
/// `kubectl apply`; the object as the API server stored it.
pub async fn apply<K>(api: &Api<K>, object: &K) -> anyhow::Result<K>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let collection = api.resource_url();
    let name = object
        .meta()
        .name
        .clone()
        .with_context(|| format!("applying an object without metadata.name to {collection}"))?;
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {collection}/{name}"))
}

/// Writes a skill directory `<parent>/<name>/SKILL.md` with valid frontmatter; its path.
pub fn write_skill(parent: &Path, name: &str, description: &str) -> anyhow::Result<PathBuf> {
    let dir = parent.join(name);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let skill_md = dir.join("SKILL.md");
    std::fs::write(
        &skill_md,
        format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nUse it well.\n"),
    )
    .with_context(|| format!("writing {}", skill_md.display()))?;
    Ok(dir)
}

/// Packs `dirs` and pushes them to the plain-HTTP registry at `registry` as `repo:tag`; the
/// pushed reference as the registry reports it (`host/repo:tag@sha256:…`).
pub async fn push_to(registry: &str, dirs: &[PathBuf], repo_tag: &str) -> anyhow::Result<String> {
    let reference = format!("{registry}/{repo_tag}");
    let image = agentic_oci::pack_skills(dirs)
        .with_context(|| format!("packing the skills of {reference}"))?;
    let options = RegistryOptions {
        insecure_registries: vec![registry.to_owned()],
        ..RegistryOptions::default()
    };
    agentic_oci::push_image(&image, &reference, &RegistryAuth::Anonymous, &options)
        .await
        .with_context(|| format!("pushing {reference}"))
}

/// The command that runs `binary` as the operator for namespace `ns` of `testenv`
/// ([`operator_command_watching`] of that namespace alone).
pub fn operator_command(binary: &Path, testenv: &TestEnv, ns: &str) -> tokio::process::Command {
    operator_command_watching(binary, testenv, &[ns])
}

/// The command that runs `binary` as the operator for `namespaces` of `testenv` (none: every
/// namespace), as its own process: the pod backend, probes and metrics on free loopback
/// ports, killed when dropped. Callers add their flags, environment and where the output goes.
pub fn operator_command_watching(
    binary: &Path,
    testenv: &TestEnv,
    namespaces: &[impl AsRef<str>],
) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(binary);
    command
        .args(["run", "--sandbox-backend", "pod"])
        .args(
            namespaces
                .iter()
                .flat_map(|namespace| ["--namespace", namespace.as_ref()]),
        )
        .args([
            "--health-addr",
            "127.0.0.1:0",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", testenv.kubeconfig_path())
        .kill_on_drop(true);
    command
}

/// How long the credential proxy may take to listen on a busy machine.
const PROXY_STARTUP: std::time::Duration = std::time::Duration::from_secs(30);

/// The operator's `binary` as a sandbox's credential proxy, a process of its own on a free
/// loopback port, forwarding to `upstream` with the bearer key of `key_file`; returned once
/// it listens, with its address, killed when dropped.
pub async fn start_credential_proxy(
    binary: &Path,
    upstream: &str,
    key_file: &Path,
) -> anyhow::Result<(tokio::process::Child, std::net::SocketAddr)> {
    // A free port: bound, then released for the proxy to take.
    let listen = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let child = tokio::process::Command::new(binary)
        .arg("credential-proxy")
        .arg(format!("--listen={listen}"))
        .arg(format!("--upstream={upstream}"))
        .arg("--auth=bearer")
        .arg(format!("--key-file={}", key_file.display()))
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting the credential proxy")?;
    let deadline = std::time::Instant::now() + PROXY_STARTUP;
    while tokio::net::TcpStream::connect(listen).await.is_err() {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the credential proxy does not listen on {listen}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Ok((child, listen))
}

/// The API key [`llm_server`] accepts.
pub const LLM_KEY: &str = "sk-test";

/// A fake LLM endpoint on 127.0.0.1, `http://127.0.0.1:<port>`, one per process, on a
/// thread of its own so that it outlives each test's runtime. It checks what the operator's
/// Gateway check sends:
/// - `/openai/v1/models`: 200 with `Authorization: Bearer` [`LLM_KEY`], else 401;
/// - `/anthropic/v1/models`: 200 with `x-api-key` [`LLM_KEY`], an `anthropic-version` and no
///   `Authorization`, else 401;
/// - `/status/<code>/v1/models`: answers `<code>`;
/// - `/same/v1/models` redirects to `/openai/v1/models` on the same origin, `/elsewhere/v1/models`
///   to it on `localhost` (another origin).
///
/// A refused answer echoes the key it got, as some servers do, so that tests can see the
/// operator never passes it on.
pub fn llm_server() -> anyhow::Result<&'static str> {
    static SERVER: OnceLock<String> = OnceLock::new();
    // Held while starting, so that two first callers at once do not start two servers.
    static STARTING: Mutex<()> = Mutex::new(());
    let _starting = STARTING.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(url) = SERVER.get() {
        return Ok(url);
    }
    let url = start_llm_server()?;
    Ok(SERVER.get_or_init(|| url))
}

fn start_llm_server() -> anyhow::Result<String> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").context("binding the fake LLM endpoint")?;
    let port = listener
        .local_addr()
        .context("the fake LLM's address")?
        .port();
    listener
        .set_nonblocking(true)
        .context("making the fake LLM's socket non-blocking")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("the fake LLM's runtime")?;
    let listener = {
        let _in_runtime = runtime.enter();
        tokio::net::TcpListener::from_std(listener).context("the fake LLM's listener")?
    };
    let app = axum::Router::new().fallback(move |uri, headers| llm_answer(port, uri, headers));
    std::thread::Builder::new()
        .name("fake-llm".into())
        .spawn(move || {
            // It serves until the process exits; an accept loop that fails leaves the
            // Gateway checks of the tests failing with the refused connection.
            let _ = runtime.block_on(axum::serve(listener, app).into_future());
        })
        .context("starting the fake LLM's thread")?;
    Ok(format!("http://127.0.0.1:{port}"))
}

#[allow(clippy::unused_async)] // An axum handler.
async fn llm_answer(port: u16, uri: Uri, headers: HeaderMap) -> Response {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let answer = |ok: bool, got: Option<&str>| {
        if ok {
            (
                StatusCode::OK,
                r#"{"data": [{"id": "gpt-test"}]}"#.to_string(),
            )
                .into_response()
        } else {
            let body = format!(r#"{{"error": "invalid key {}"}}"#, got.unwrap_or("(none)"));
            (StatusCode::UNAUTHORIZED, body).into_response()
        }
    };
    let redirect = |host: &str| {
        let to = format!("http://{host}:{port}/openai/v1/models");
        (StatusCode::TEMPORARY_REDIRECT, [(header::LOCATION, to)]).into_response()
    };
    let path = uri.path();
    match path.strip_suffix("/v1/models").unwrap_or_default() {
        "/openai" => {
            let bearer = format!("Bearer {LLM_KEY}");
            answer(
                get("authorization") == Some(bearer.as_str()),
                get("authorization"),
            )
        }
        "/anthropic" => answer(
            get("x-api-key") == Some(LLM_KEY)
                && get("anthropic-version").is_some()
                && get("authorization").is_none(),
            get("x-api-key"),
        ),
        "/same" => redirect("127.0.0.1"),
        "/elsewhere" => redirect("localhost"),
        other => match other
            .strip_prefix("/status/")
            .and_then(|c| c.parse::<u16>().ok())
        {
            Some(code) => StatusCode::from_u16(code)
                .unwrap_or(StatusCode::IM_A_TEAPOT)
                .into_response(),
            None => StatusCode::NOT_FOUND.into_response(),
        },
    }
}

/// The Gateway `name` of `provider` at `endpoint`, model `gpt-test`, its key in the
/// `apiKey` of the Secret `secret` (none for cloud-signed providers).
pub fn gateway(name: &str, provider: &str, endpoint: &str, secret: Option<&str>) -> Gateway {
    Gateway {
        metadata: named(name),
        spec: GatewaySpec {
            provider: provider.into(),
            endpoint: Some(endpoint.into()),
            credential_ref: secret.map(|secret| CredentialRef {
                secret_name: secret.into(),
                key: Some("apiKey".into()),
            }),
            model: GatewayModel {
                name: "gpt-test".into(),
                context_window: 128_000,
                tier: None,
            },
        },
        status: None,
    }
}

/// The Secret `name` holding `key` as its `apiKey`, as [`gateway`] reads it.
pub fn key_secret(name: &str, key: &str) -> Secret {
    Secret {
        metadata: named(name),
        string_data: Some(std::collections::BTreeMap::from([(
            "apiKey".to_string(),
            key.to_string(),
        )])),
        ..Secret::default()
    }
}

/// Applies the Gateway `llm` (provider `openai`, endpoint [`llm_server`]) and its Secret
/// `llm-key` with [`LLM_KEY`] in `ns`: what most runs need and none looks into.
pub async fn llm_gateway(client: &Client, ns: &str) -> anyhow::Result<()> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    apply(&secrets, &key_secret("llm-key", LLM_KEY)).await?;
    let gateways: Api<Gateway> = Api::namespaced(client.clone(), ns);
    let endpoint = format!("{}/openai", llm_server()?);
    apply(
        &gateways,
        &gateway("llm", "openai", &endpoint, Some("llm-key")),
    )
    .await?;
    Ok(())
}

fn named(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        ..ObjectMeta::default()
    }
}

/// A string attribute of an OTLP span or resource.
pub fn otlp_string(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.into())),
        }),
        ..KeyValue::default()
    }
}

/// goose's span of a `load_skill` call naming `skill` in the tool's arguments (which goose
/// exports with `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
pub fn load_skill_span(trace_id: Vec<u8>, span_id: Vec<u8>, skill: &str) -> Span {
    Span {
        trace_id,
        span_id,
        name: "execute_tool load_skill".into(),
        attributes: vec![
            otlp_string("gen_ai.operation.name", "execute_tool"),
            otlp_string("gen_ai.tool.name", "load_skill"),
            otlp_string(
                "gen_ai.tool.call.arguments",
                &serde_json::json!({"name": skill}).to_string(),
            ),
        ],
        ..Span::default()
    }
}
