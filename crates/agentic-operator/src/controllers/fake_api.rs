//! An API server in memory, for the fast tests of the real controllers (as controller-rs
//! tests its reconciler): it keeps objects by path, answers reads, creates, server-side
//! applies, status applies, replaces (with their version check) and deletes the way the API server does for what the passes
//! send, and records every request. It knows no schema, no admission and no watch: the
//! passes under test read through the API (no caches are registered), and what they wrote
//! is read back from here.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use kube::Client;
use serde_json::{Value, json};

/// One request as the fake server saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub body: String,
}

#[derive(Default)]
struct State {
    objects: BTreeMap<String, Value>,
    requests: Vec<Recorded>,
    next_uid: u64,
}

/// The fake API server; clones share it.
#[derive(Clone, Default)]
pub struct FakeApi(Arc<Mutex<State>>);

impl FakeApi {
    /// A client whose every request this server answers.
    pub fn client(&self) -> Client {
        let api = self.clone();
        let service = tower::service_fn(move |request: Request<kube::client::Body>| {
            let api = api.clone();
            async move {
                let (parts, body) = request.into_parts();
                let body = body.collect().await?.to_bytes();
                let query = parts.uri.query().unwrap_or_default().to_string();
                let (status, answer) = api.answer(parts.method, parts.uri.path(), &query, &body);
                let mut response = Response::new(Full::new(Bytes::from(answer.to_string())));
                *response.status_mut() = status;
                Ok::<_, tower::BoxError>(response)
            }
        });
        Client::new(service, "default")
    }

    /// Stores `object` (any serializable Kubernetes object) as the API server would hold it.
    pub fn put<K: serde::Serialize + kube::Resource<DynamicType = ()>>(&self, object: &K) {
        let mut value = serde_json::to_value(object).expect("a serializable object");
        let path = object_path(
            &value,
            &K::url_path(&(), object.meta().namespace.as_deref()),
        );
        let mut state = self.state();
        state.admit(&mut value);
        state.objects.insert(path, value);
    }

    /// The object at `collection/name`, as stored now.
    pub fn get<K: serde::de::DeserializeOwned + kube::Resource<DynamicType = ()>>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<K> {
        let path = format!("{}/{name}", K::url_path(&(), Some(namespace)));
        let value = self.state().objects.get(&path).cloned()?;
        Some(serde_json::from_value(value).expect("a stored object of its kind"))
    }

    /// The names of the stored objects of `K` in `namespace`.
    pub fn names<K: kube::Resource<DynamicType = ()>>(&self, namespace: &str) -> Vec<String> {
        let prefix = format!("{}/", K::url_path(&(), Some(namespace)));
        self.state()
            .objects
            .keys()
            .filter_map(|path| path.strip_prefix(&prefix))
            .map(str::to_string)
            .collect()
    }

    /// The requests that changed something (anything but GET).
    pub fn writes(&self) -> Vec<Recorded> {
        self.state()
            .requests
            .iter()
            .filter(|r| r.method != Method::GET)
            .cloned()
            .collect()
    }

    /// The paths read (GET), in order.
    pub fn reads(&self) -> Vec<String> {
        self.state()
            .requests
            .iter()
            .filter(|r| r.method == Method::GET)
            .map(|r| r.path.clone())
            .collect()
    }

    /// Forgets the requests recorded so far.
    pub fn clear_requests(&self) {
        self.state().requests.clear();
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn answer(&self, method: Method, path: &str, query: &str, body: &[u8]) -> (StatusCode, Value) {
        let mut state = self.state();
        state.requests.push(Recorded {
            method: method.clone(),
            path: path.to_string(),
            query: query.to_string(),
            body: String::from_utf8_lossy(body).into_owned(),
        });
        let sent: Option<Value> = serde_json::from_slice(body).ok();
        let (target, status_subresource) = match path.strip_suffix("/status") {
            Some(object) => (object.to_string(), true),
            None => (path.to_string(), false),
        };
        match method {
            Method::GET if state.objects.contains_key(&target) => {
                (StatusCode::OK, state.objects[&target].clone())
            }
            Method::GET if is_collection(&target) => (StatusCode::OK, state.list(&target, query)),
            Method::GET => not_found(&target),
            Method::POST => {
                let Some(mut object) = sent else {
                    return bad_request("no object in the body");
                };
                let name = match object["metadata"]["name"].as_str() {
                    Some(name) => name.to_string(),
                    None => {
                        let prefix = object["metadata"]["generateName"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string();
                        let name = format!("{prefix}{:05}", state.next_uid);
                        object["metadata"]["name"] = json!(name);
                        name
                    }
                };
                let path = format!("{target}/{name}");
                if state.objects.contains_key(&path) {
                    return already_exists(&path);
                }
                state.admit(&mut object);
                state.objects.insert(path, object.clone());
                (StatusCode::CREATED, object)
            }
            Method::PATCH => {
                let Some(sent) = sent else {
                    return bad_request("no patch in the body");
                };
                match state.objects.get_mut(&target) {
                    Some(stored) if status_subresource => {
                        stored["status"] = sent["status"].clone();
                        (StatusCode::OK, stored.clone())
                    }
                    Some(stored) => {
                        for (field, value) in sent.as_object().into_iter().flatten() {
                            if field != "metadata" && field != "status" {
                                stored[field] = value.clone();
                            }
                        }
                        for (field, value) in sent["metadata"].as_object().into_iter().flatten() {
                            stored["metadata"][field] = value.clone();
                        }
                        (StatusCode::OK, stored.clone())
                    }
                    None if status_subresource => not_found(&target),
                    None => {
                        let mut object = sent;
                        state.admit(&mut object);
                        state.objects.insert(target, object.clone());
                        (StatusCode::CREATED, object)
                    }
                }
            }
            // A replace: refused when the version it names is not the stored one.
            Method::PUT => {
                let Some(mut object) = sent else {
                    return bad_request("no object in the body");
                };
                let stored_version = state
                    .objects
                    .get(&target)
                    .map(|stored| stored["metadata"]["resourceVersion"].clone());
                match stored_version {
                    None => not_found(&target),
                    Some(version) if version != object["metadata"]["resourceVersion"] => status(
                        StatusCode::CONFLICT,
                        "Conflict",
                        format!("{target} was changed since it was read"),
                    ),
                    Some(_) => {
                        state.admit(&mut object);
                        state.objects.insert(target, object.clone());
                        (StatusCode::OK, object)
                    }
                }
            }
            Method::DELETE => match state.objects.remove(&target) {
                Some(object) => (StatusCode::OK, object),
                None => not_found(&target),
            },
            _ => bad_request("a method the fake API server does not serve"),
        }
    }
}

impl State {
    /// What the API server adds to an object it stores: a UID, a resource version and (for
    /// a new object) the time it was created, now.
    fn admit(&mut self, object: &mut Value) {
        self.next_uid += 1;
        let metadata = &mut object["metadata"];
        if metadata["uid"].is_null() {
            metadata["uid"] = json!(format!("uid-{}", self.next_uid));
        }
        metadata["resourceVersion"] = json!(self.next_uid.to_string());
        if metadata["creationTimestamp"].is_null() {
            let now = k8s_openapi::jiff::Timestamp::now();
            metadata["creationTimestamp"] =
                json!(format!("{}Z", now.strftime("%Y-%m-%dT%H:%M:%S")));
        }
    }

    /// The objects directly in `collection` that the label selector of `query` selects
    /// (`key`, `!key`, `key=value`, comma-separated; keys may have a `prefix/`).
    fn list(&self, collection: &str, query: &str) -> Value {
        let selector = query
            .split('&')
            .find_map(|pair| pair.strip_prefix("labelSelector="))
            .map(|s| {
                s.replace("%21", "!")
                    .replace("%3D", "=")
                    .replace("%2C", ",")
                    .replace("%2F", "/")
            })
            .unwrap_or_default();
        let prefix = format!("{collection}/");
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|(path, _)| {
                path.strip_prefix(&prefix)
                    .is_some_and(|rest| !rest.contains('/'))
            })
            .map(|(_, object)| object.clone())
            .filter(|object| selects(&selector, &object["metadata"]["labels"]))
            .collect();
        json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": items})
    }
}

fn selects(selector: &str, labels: &Value) -> bool {
    selector
        .split(',')
        .filter(|term| !term.is_empty())
        .all(|term| {
            if let Some(key) = term.strip_prefix('!') {
                labels[key].is_null()
            } else if let Some((key, value)) = term.split_once('=') {
                labels[key].as_str() == Some(value)
            } else {
                !labels[term].is_null()
            }
        })
}

/// The path of a stored object: its collection's and its name.
fn object_path(object: &Value, collection: &str) -> String {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    format!("{collection}/{name}")
}

/// Whether `path` names a collection (`.../namespaces/<ns>/<plural>` or `.../<plural>`)
/// rather than one object.
fn is_collection(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.iter().position(|s| *s == "namespaces") {
        Some(at) => segments.len() == at + 3,
        None => true,
    }
}

fn status(code: StatusCode, reason: &str, message: String) -> (StatusCode, Value) {
    let body = json!({
        "apiVersion": "v1", "kind": "Status", "status": "Failure",
        "reason": reason, "message": message, "code": code.as_u16(),
    });
    (code, body)
}

fn not_found(path: &str) -> (StatusCode, Value) {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("{path} not found"),
    )
}

fn already_exists(path: &str) -> (StatusCode, Value) {
    status(
        StatusCode::CONFLICT,
        "AlreadyExists",
        format!("{path} already exists"),
    )
}

fn bad_request(message: &str) -> (StatusCode, Value) {
    status(StatusCode::BAD_REQUEST, "BadRequest", message.to_string())
}
