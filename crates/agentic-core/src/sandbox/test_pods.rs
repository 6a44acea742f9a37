//! The pods and agent container states the tests of the sandbox's decisions observe.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateWaiting, ContainerStatus, Pod, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

pub(super) fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).expect("valid timestamp"))
}

/// The sandbox pod `fix-123` in `phase`, its agent container in `agent` (no container status
/// when `None`).
pub(super) fn pod(phase: &str, agent: Option<ContainerState>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some("fix-123".into()),
            ..Default::default()
        },
        status: Some(PodStatus {
            phase: Some(phase.into()),
            container_statuses: agent.map(|state| {
                vec![ContainerStatus {
                    name: "agent".into(),
                    state: Some(state),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub(super) fn running(since: i64) -> ContainerState {
    ContainerState {
        running: Some(ContainerStateRunning {
            started_at: Some(at(since)),
        }),
        ..Default::default()
    }
}

pub(super) fn waiting(reason: &str, message: Option<&str>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.into()),
            message: message.map(Into::into),
        }),
        ..Default::default()
    }
}
