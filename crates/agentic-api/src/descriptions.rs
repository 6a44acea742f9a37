//! Schema descriptions as `kubectl explain` should print them.
//!
//! Doc comments are wrapped at the source line width; `kubectl explain` wraps text itself, so
//! a hard line break in a description shows up as a ragged line. Paragraph breaks stay.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
    JSONSchemaPropsOrStringArray,
};

/// Unwraps the descriptions of every schema in every version of `crd`.
pub(crate) fn unwrap_crd(crd: &mut CustomResourceDefinition) {
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            unwrap_schema(schema);
        }
    }
}

fn unwrap_schema(schema: &mut JSONSchemaProps) {
    if let Some(description) = &mut schema.description {
        *description = unwrap_lines(description);
    }
    let maps = [
        &mut schema.properties,
        &mut schema.pattern_properties,
        &mut schema.definitions,
    ];
    for sub in maps.into_iter().flatten().flat_map(|m| m.values_mut()) {
        unwrap_schema(sub);
    }
    let lists = [&mut schema.all_of, &mut schema.any_of, &mut schema.one_of];
    for sub in lists.into_iter().flatten().flatten() {
        unwrap_schema(sub);
    }
    if let Some(not) = &mut schema.not {
        unwrap_schema(not);
    }
    match &mut schema.items {
        Some(JSONSchemaPropsOrArray::Schema(sub)) => unwrap_schema(sub),
        Some(JSONSchemaPropsOrArray::Schemas(subs)) => subs.iter_mut().for_each(unwrap_schema),
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
            unwrap_schema(sub);
        }
    }
    for dependency in schema.dependencies.iter_mut().flat_map(|m| m.values_mut()) {
        if let JSONSchemaPropsOrStringArray::Schema(sub) = dependency {
            unwrap_schema(sub);
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
