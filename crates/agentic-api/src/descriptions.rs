//! Schema descriptions as `kubectl explain` should print them.
//!
//! Doc comments are wrapped at the source line width; `kubectl explain` wraps text itself, so
//! a hard line break in a description shows up as a ragged line. Paragraph breaks stay.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSON, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
    JSONSchemaPropsOrStringArray,
};
use serde_json::Value;

/// Unwraps the descriptions of every schema in every version of `crd`.
pub(crate) fn unwrap_crd(crd: &mut CustomResourceDefinition) {
    visit_crd(crd, &mut |schema| {
        if let Some(description) = &mut schema.description {
            *description = unwrap_lines(description);
        }
    });
}

/// The properties holding a reference to a ConfigMap or Secret by `name`, in `env` and
/// `envFrom`: Kubernetes 1.36 (and Konveyor's schema) leaves `name` optional there.
const NAMED_REFERENCES: [&str; 4] = [
    "configMapKeyRef",
    "secretKeyRef",
    "configMapRef",
    "secretRef",
];

/// Makes `name` optional, with the default `""`, in every reference of [`NAMED_REFERENCES`]
/// under an `env` or `envFrom` property, where k8s-openapi's schema, older than that rule,
/// still requires it; and defaults `fileKeyRef.optional` to `false`. Kubernetes' own schema
/// and Konveyor's have both defaults, so an object reads back the same from either.
pub(crate) fn optional_reference_names(crd: &mut CustomResourceDefinition) {
    visit_crd(crd, &mut |schema| {
        for (property, env) in schema.properties.iter_mut().flatten() {
            if property == "env" || property == "envFrom" {
                visit_schema(env, &mut reference_defaults);
            }
        }
    });
}

fn reference_defaults(schema: &mut JSONSchemaProps) {
    for (property, reference) in schema.properties.iter_mut().flatten() {
        if property == "fileKeyRef" {
            set_default(reference, "optional", Value::Bool(false));
        }
        if !NAMED_REFERENCES.contains(&property.as_str()) {
            continue;
        }
        if let Some(required) = &mut reference.required {
            required.retain(|field| field != "name");
            if required.is_empty() {
                reference.required = None;
            }
        }
        set_default(reference, "name", Value::String(String::new()));
    }
}

/// Defaults `status.phase` to `Pending`, as Konveyor's AgentRun and AgentWorkflowRun do, in
/// every CRD whose status has a phase that may be `Pending`. The API server applies it when a
/// status is written without a phase, and to stored objects as it reads them.
pub(crate) fn pending_status_phase(crd: &mut CustomResourceDefinition) {
    visit_crd(crd, &mut |schema| {
        let Some(status) = schema
            .properties
            .as_mut()
            .and_then(|properties| properties.get_mut("status"))
        else {
            return;
        };
        let may_be_pending = status
            .properties
            .as_ref()
            .and_then(|properties| properties.get("phase"))
            .and_then(|phase| phase.enum_.as_ref())
            .is_some_and(|values| values.iter().any(|v| v.0 == "Pending"));
        if may_be_pending {
            set_default(status, "phase", Value::String("Pending".to_string()));
        }
    });
}

/// Sets the default of `schema`'s property `property`, when it has one.
fn set_default(schema: &mut JSONSchemaProps, property: &str, default: Value) {
    if let Some(field) = schema
        .properties
        .as_mut()
        .and_then(|properties| properties.get_mut(property))
    {
        field.default = Some(JSON(default));
    }
}

/// Calls `f` on every schema in every version of `crd`, parents before children.
fn visit_crd(crd: &mut CustomResourceDefinition, f: &mut impl FnMut(&mut JSONSchemaProps)) {
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            visit_schema(schema, f);
        }
    }
}

fn visit_schema(schema: &mut JSONSchemaProps, f: &mut impl FnMut(&mut JSONSchemaProps)) {
    f(schema);
    let maps = [
        &mut schema.properties,
        &mut schema.pattern_properties,
        &mut schema.definitions,
    ];
    for sub in maps.into_iter().flatten().flat_map(|m| m.values_mut()) {
        visit_schema(sub, f);
    }
    let lists = [&mut schema.all_of, &mut schema.any_of, &mut schema.one_of];
    for sub in lists.into_iter().flatten().flatten() {
        visit_schema(sub, f);
    }
    if let Some(not) = &mut schema.not {
        visit_schema(not, f);
    }
    match &mut schema.items {
        Some(JSONSchemaPropsOrArray::Schema(sub)) => visit_schema(sub, f),
        Some(JSONSchemaPropsOrArray::Schemas(subs)) => {
            for sub in subs.iter_mut() {
                visit_schema(sub, f);
            }
        }
        None => {}
    }
    for or_bool in [
        &mut schema.additional_items,
        &mut schema.additional_properties,
    ]
    .into_iter()
    .flatten()
    {
        if let JSONSchemaPropsOrBool::Schema(sub) = or_bool {
            visit_schema(sub, f);
        }
    }
    for dependency in schema.dependencies.iter_mut().flat_map(|m| m.values_mut()) {
        if let JSONSchemaPropsOrStringArray::Schema(sub) = dependency {
            visit_schema(sub, f);
        }
    }
}

/// Joins the lines of each paragraph with a space; paragraphs stay apart by one blank line.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| {
            paragraph
                .lines()
                .map(str::trim)
                .filter(|line| !line.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|paragraph| !paragraph.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::unwrap_lines;

    #[test]
    fn lines_join_and_paragraphs_stay() {
        assert_eq!(
            unwrap_lines("One line\nwrapped here.\n\nSecond\n paragraph.\n\n\n Third."),
            "One line wrapped here.\n\nSecond paragraph.\n\nThird."
        );
        assert_eq!(unwrap_lines("Single line."), "Single line.");
    }
}
