//! What `tools/list` advertises, and the facts the policy reads from an rmcp [`Tool`].
//!
//! The classification itself is mcp-write-guard-policy's; the output-schema rewrite is envelope's. This
//! module only converts between rmcp's types and theirs.

use std::sync::Arc;

use mcp_write_guard_envelope::EnvelopePolicy;
use mcp_write_guard_policy::{
    Annotations, Classification, ToolFacts, advertised_annotations, classify,
};
use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::json;

/// The tool the guard adds when any tool is token-gated: it asks the user, then returns a
/// confirmation token bound to one tool and its exact arguments.
pub const PREPARE_ADMIN_ACTION: &str = "prepare_admin_action";

/// The policy's view of an rmcp tool annotation object.
pub(crate) fn annotations_of(tool: &Tool) -> Option<Annotations> {
    tool.annotations.as_ref().map(|a| Annotations {
        title: a.title.clone(),
        read_only_hint: a.read_only_hint,
        destructive_hint: a.destructive_hint,
        idempotent_hint: a.idempotent_hint,
        open_world_hint: a.open_world_hint,
    })
}

fn to_rmcp(a: Annotations) -> ToolAnnotations {
    ToolAnnotations::from_raw(
        a.title,
        a.read_only_hint,
        a.destructive_hint,
        a.idempotent_hint,
        a.open_world_hint,
    )
}

/// Classifies an rmcp tool.
pub(crate) fn classify_tool(tool: &Tool) -> Classification {
    let annotations = annotations_of(tool);
    classify(&ToolFacts::new(
        &tool.name,
        annotations.as_ref(),
        &tool.input_schema,
    ))
}

/// The tool as the guard advertises it: annotations rewritten where the policy says so (a
/// token-gated tool is destructive whatever it claims), and the output schema of the wrapped
/// result for tools whose results get the envelope.
pub(crate) fn advertise(mut tool: Tool, envelope: &EnvelopePolicy) -> Tool {
    let annotations = annotations_of(&tool);
    let facts = ToolFacts::new(&tool.name, annotations.as_ref(), &tool.input_schema);
    let classification = classify(&facts);
    let rewritten = advertised_annotations(&facts);
    if let Some(rewritten) = rewritten {
        tool.annotations = Some(to_rmcp(rewritten));
    }
    if envelope.should_wrap(&tool.name, classification.class)
        && let Some(schema) = tool.output_schema.take()
    {
        tool.output_schema = Some(Arc::new(mcp_write_guard_envelope::wrap_output_schema(
            &schema,
        )));
    }
    tool
}

/// The definition of [`PREPARE_ADMIN_ACTION`].
pub(crate) fn prepare_admin_action_tool() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {
            "tool": {
                "type": "string",
                "description": "The name of the tool that needs a confirmation token."
            },
            "arguments": {
                "type": "object",
                "description": "The exact arguments the tool will be called with (without confirmationToken)."
            }
        },
        "required": ["tool", "arguments"],
        "additionalProperties": false
    });
    let output = json!({
        "type": "object",
        "properties": {
            "confirmationToken": {"type": "string"},
            "tool": {"type": "string"},
            "expiresAt": {"type": "string"}
        },
        "required": ["confirmationToken", "tool", "expiresAt"]
    });
    let mut tool = Tool::new(
        PREPARE_ADMIN_ACTION,
        "Asks the user to approve one admin action (a tool and its exact arguments). When the \
         user approves, returns a confirmationToken that is valid once, for five minutes, for \
         that tool with exactly those arguments. The action itself still needs the user's \
         approval when it is called.",
        as_object(input),
    )
    .with_title("Prepare an admin action")
    .with_annotations(
        ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .idempotent(false)
            .open_world(false),
    );
    tool.output_schema = Some(Arc::new(as_object(output)));
    tool
}

fn as_object(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

#[cfg(test)]
mod tests {
    use mcp_write_guard_policy::ToolClass;
    use serde_json::Value;

    use super::*;

    fn tool(name: &'static str, schema: Value, annotations: Option<ToolAnnotations>) -> Tool {
        let mut tool = Tool::new(name, "t", as_object(schema));
        tool.annotations = annotations;
        tool
    }

    #[test]
    fn a_token_gated_tool_is_advertised_destructive_whatever_it_claims() {
        let t = tool(
            "drop_table",
            json!({"type": "object", "properties": {"confirmationToken": {"type": "string"}}}),
            Some(ToolAnnotations::new().read_only(true).destructive(false)),
        );
        assert!(classify_tool(&t).token_gated);
        let advertised = advertise(t, &EnvelopePolicy::new());
        let a = advertised.annotations.unwrap();
        assert_eq!(a.read_only_hint, Some(false));
        assert_eq!(a.destructive_hint, Some(true));
    }

    #[test]
    fn output_schemas_of_wrapped_tools_describe_the_envelope_and_trusted_reads_keep_theirs() {
        let schema = as_object(json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
        let mut read = tool(
            "get_count",
            json!({"type": "object"}),
            Some(ToolAnnotations::new().read_only(true)),
        );
        read.output_schema = Some(Arc::new(schema.clone()));
        assert_eq!(classify_tool(&read).class, ToolClass::Read);

        let wrapped = advertise(read.clone(), &EnvelopePolicy::new());
        let wrapped_schema = wrapped.output_schema.unwrap();
        assert_eq!(
            *wrapped_schema,
            mcp_write_guard_envelope::wrap_output_schema(&schema)
        );
        assert_eq!(wrapped.annotations, read.annotations);

        let trusted = advertise(read, &EnvelopePolicy::new().trust_read("get_count"));
        assert_eq!(*trusted.output_schema.unwrap(), schema);
    }

    #[test]
    fn prepare_admin_action_is_an_additive_closed_world_write() {
        let t = prepare_admin_action_tool();
        let a = t.annotations.clone().unwrap();
        assert_eq!(a.read_only_hint, Some(false));
        assert_eq!(a.destructive_hint, Some(false));
        assert_eq!(a.idempotent_hint, Some(false));
        assert_eq!(a.open_world_hint, Some(false));
        assert_eq!(classify_tool(&t).class, ToolClass::AdditiveWrite);
        assert!(!classify_tool(&t).token_gated);
    }
}
