//! Gateway: Ready when its credential Secret (and key, when given) exists.

use std::sync::Arc;
use std::time::Instant;

use agentic_api::{CONDITION_READY, ConditionStatus, Gateway};
use agentic_core::conditions::set_condition;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::namespace_of;
use crate::apply::apply_status;
use crate::context::Context;
use crate::error::{Error, Result};

pub const KIND: &str = "Gateway";

pub async fn reconcile(gateway: Arc<Gateway>, ctx: Arc<Context>) -> Result<Action> {
    let started = Instant::now();
    let namespace = namespace_of(gateway.as_ref(), KIND)?;
    let (status, reason, message) = match &gateway.spec.credential_ref {
        None => (
            ConditionStatus::True,
            "NoCredentialsRequired",
            "the gateway has no credentialRef".to_string(),
        ),
        Some(cred) => {
            let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &namespace);
            match (secrets.get_opt(&cred.secret_name).await?, &cred.key) {
                (None, _) => (
                    ConditionStatus::False,
                    "SecretNotFound",
                    format!(
                        "spec.credentialRef.secretName: Secret {} not found in namespace {namespace}",
                        cred.secret_name
                    ),
                ),
                (Some(secret), Some(key)) if !secret_has_key(&secret, key) => (
                    ConditionStatus::False,
                    "SecretKeyNotFound",
                    format!(
                        "spec.credentialRef.key: Secret {} has no key {key}",
                        cred.secret_name
                    ),
                ),
                (Some(_), _) => (
                    ConditionStatus::True,
                    "CredentialsFound",
                    format!("credentials found in Secret {}", cred.secret_name),
                ),
            }
        }
    };

    let generation = gateway.metadata.generation;
    let old = gateway.status.clone().unwrap_or_default();
    let mut new = old.clone();
    new.observed_generation = generation;
    set_condition(
        &mut new.conditions,
        CONDITION_READY,
        status,
        reason,
        &message,
        generation,
        crate::now(),
    );
    if new != old {
        let api: Api<Gateway> = Api::namespaced(ctx.client.clone(), &namespace);
        apply_status(&api, &gateway.name_any(), &new).await?;
        ctx.announce(
            gateway.as_ref(),
            &old.conditions,
            &new.conditions,
            CONDITION_READY,
        )
        .await;
    }
    ctx.metrics.reconciled(KIND, started.elapsed());
    ctx.succeeded(KIND, gateway.as_ref());
    Ok(Action::await_change())
}

pub fn error_policy(gateway: Arc<Gateway>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.backoff(KIND, gateway.as_ref(), error)
}

fn secret_has_key(secret: &Secret, key: &str) -> bool {
    secret.data.as_ref().is_some_and(|d| d.contains_key(key))
        || secret
            .string_data
            .as_ref()
            .is_some_and(|d| d.contains_key(key))
}

/// The Gateways that name `secret` as their credential.
pub fn gateways_using_secret<'a>(
    gateways: impl IntoIterator<Item = &'a Gateway>,
    namespace: &str,
    secret: &str,
) -> Vec<kube::runtime::reflector::ObjectRef<Gateway>> {
    gateways
        .into_iter()
        .filter(|g| g.namespace().as_deref() == Some(namespace))
        .filter(|g| {
            g.spec
                .credential_ref
                .as_ref()
                .is_some_and(|c| c.secret_name == secret)
        })
        .map(kube::runtime::reflector::ObjectRef::from_obj)
        .collect()
}
