//! What `tools/list` advertises, and the facts the policy reads from an rmcp [`Tool`].
//!
//! The classification itself is mcp-write-guard-policy's; the output-schema rewrite is envelope's. This
//! module only converts between rmcp's types and theirs.

use std::{borrow::Cow, sync::Arc};

use mcp_write_guard_core::{
    Approved, ToolChanged, ToolDefinition, definition::DefinitionError, ids::DefinitionDigest,
};
use mcp_write_guard_envelope::EnvelopePolicy;
use mcp_write_guard_policy::{
    Annotations, Classification, ToolFacts, advertised_annotations, classify,
};
use rmcp::{
    handler::server::common::schema_for_type,
    model::{JsonObject, Tool, ToolAnnotations},
    schemars::JsonSchema,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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

/// `tool`'s annotations as the protocol's JSON object, for its definition's digest.
fn annotations_json(tool: &Tool) -> Result<Option<Value>, DefinitionError> {
    tool.annotations
        .as_ref()
        .map(serde_json::to_value)
        .transpose()
        .map_err(|error| DefinitionError::Unrepresentable(error.to_string()))
}

/// mcp-write-guard-core's view of `tool`'s definition (what its digest counts), with its
/// annotations as JSON.
fn definition_view<'a>(tool: &'a Tool, annotations: Option<&'a Value>) -> ToolDefinition<'a> {
    ToolDefinition::new(&tool.name, &tool.input_schema)
        .with_title(tool.title.as_deref())
        .with_description(tool.description.as_deref())
        .with_output_schema(tool.output_schema.as_deref())
        .with_annotations(annotations)
}

/// The digest of `tool`'s definition as the inner server hands it out (what the guard
/// advertises is derived from it).
pub(crate) fn definition_digest(tool: &Tool) -> Result<DefinitionDigest, DefinitionError> {
    let annotations = annotations_json(tool)?;
    definition_view(tool, annotations.as_ref()).digest()
}

/// Whether `current`, the tool as the inner server hands it out just before the apply (`None`:
/// it has no such tool any more), is the one `approved` was approved for (mcp-write-guard-core
/// decides).
pub(crate) fn check_definition(
    approved: &Approved,
    current: Option<&Tool>,
) -> Result<(), ToolChanged> {
    let Some(tool) = current else {
        return approved.check_definition(None);
    };
    let annotations = annotations_json(tool).map_err(ToolChanged::Unreadable)?;
    approved.check_definition(Some(&definition_view(tool, annotations.as_ref())))
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

/// The classification of the tools a `tools/call` named, kept while the inner server hands out
/// the very same tool: an entry counts only for a tool of the same name, the same annotations
/// and the same input schema allocation (the entry holds a clone of the schema's `Arc`, so the
/// allocation cannot be freed and reused for another schema, and a schema that changes is a new
/// allocation). A read then costs a comparison instead of a walk through its schema. At most
/// [`Self::MAX`] entries; beyond, tools are classified each call.
#[derive(Debug, Default)]
pub(crate) struct Classified {
    entries: parking_lot::Mutex<Vec<Entry>>,
}

/// A tool as it was classified: its name, schema and annotations, and its classification.
type Entry = (
    Cow<'static, str>,
    Arc<JsonObject>,
    Option<ToolAnnotations>,
    Classification,
);

impl Classified {
    const MAX: usize = 256;

    /// `tool`'s classification, from the entry of the same tool or classified now.
    pub(crate) fn of(&self, tool: &Tool) -> Classification {
        let same = |(name, schema, annotations, _): &&Entry| {
            *name == tool.name
                && Arc::ptr_eq(schema, &tool.input_schema)
                && *annotations == tool.annotations
        };
        if let Some((.., class)) = self.entries.lock().iter().find(same) {
            return *class;
        }
        let class = classify_tool(tool);
        let mut entries = self.entries.lock();
        entries.retain(|(name, ..)| *name != tool.name);
        if entries.len() < Self::MAX {
            entries.push((
                tool.name.clone(),
                Arc::clone(&tool.input_schema),
                tool.annotations.clone(),
                class,
            ));
        }
        class
    }
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

/// [`PREPARE_ADMIN_ACTION`]'s arguments. Its input schema is derived from this type and a
/// call's arguments are read into it, so what is advertised and what is accepted cannot differ.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
pub(crate) struct AdminActionInput {
    /// The name of the tool that needs a confirmation token.
    pub(crate) tool: String,
    /// The exact arguments the tool will be called with (without confirmationToken).
    pub(crate) arguments: JsonObject,
}

/// [`PREPARE_ADMIN_ACTION`]'s structured result; its output schema is derived from this type.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(crate = "rmcp::schemars")]
pub(crate) struct AdminActionToken {
    /// Valid once, until `expiresAt`, for `tool` with exactly the approved arguments.
    pub(crate) confirmation_token: String,
    /// The tool the token is for.
    pub(crate) tool: String,
    /// When the token expires (RFC 3339).
    pub(crate) expires_at: String,
}

/// The definition of [`PREPARE_ADMIN_ACTION`].
pub(crate) fn prepare_admin_action_tool() -> Tool {
    Tool::new(
        PREPARE_ADMIN_ACTION,
        "Asks the user to approve one admin action (a tool and its exact arguments). When the \
         user approves, returns a confirmationToken that is valid once, for five minutes, for \
         that tool with exactly those arguments. The action itself still needs the user's \
         approval when it is called.",
        schema_for_type::<AdminActionInput>(),
    )
    .with_title("Prepare an admin action")
    .with_annotations(
        ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .idempotent(false)
            .open_world(false),
    )
    .with_output_schema::<AdminActionToken>()
}

#[cfg(test)]
mod tests {
    use mcp_write_guard_policy::{CONFIRMATION_TOKEN_ARG, ToolClass};
    use serde_json::{Value, json};

    use super::*;

    fn as_object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

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

    #[test]
    fn prepare_admin_action_advertises_exactly_what_it_accepts() {
        let t = prepare_admin_action_tool();
        let input = Value::Object((*t.input_schema).clone());
        assert_eq!(input["type"], "object");
        assert_eq!(input["additionalProperties"], false, "{input}");
        assert_eq!(input["required"], json!(["tool", "arguments"]), "{input}");
        assert_eq!(input["properties"]["tool"]["type"], "string");
        assert_eq!(input["properties"]["arguments"]["type"], "object");
        let output = Value::Object((*t.output_schema.unwrap()).clone());
        let mut required: Vec<_> = output["required"].as_array().unwrap().clone();
        required.sort_by_key(|v| v.to_string());
        assert_eq!(
            required,
            [
                json!(CONFIRMATION_TOKEN_ARG),
                json!("expiresAt"),
                json!("tool")
            ],
            "{output}"
        );
        for (arguments, accepted) in [
            (json!({"tool": "t", "arguments": {}}), true),
            (json!({"tool": "t", "arguments": {}, "more": 1}), false),
            (json!({"tool": "t"}), false),
            (json!({"tool": 1, "arguments": {}}), false),
            (json!({"tool": "t", "arguments": []}), false),
        ] {
            let parsed = AdminActionInput::deserialize(arguments.as_object().unwrap());
            assert_eq!(parsed.is_ok(), accepted, "{arguments}");
        }
    }

    #[test]
    fn a_kept_classification_counts_only_for_the_very_same_tool() {
        let classified = Classified::default();
        let read = tool(
            "get_count",
            json!({"type": "object"}),
            Some(ToolAnnotations::new().read_only(true)),
        );
        assert_eq!(classified.of(&read).class, ToolClass::Read);
        assert_eq!(classified.of(&read.clone()).class, ToolClass::Read);
        assert_eq!(classified.entries.lock().len(), 1);
        // Same name and schema, the annotations now say write: classified anew.
        let mut write = read.clone();
        write.annotations = Some(ToolAnnotations::new().read_only(false));
        assert!(classified.of(&write).class.is_write());
        // Same name and annotations, a schema that now takes a token: classified anew, even
        // though the old schema's entry was for a read.
        let mut gated = read.clone();
        gated.input_schema = Arc::new(as_object(json!({
            "type": "object", "properties": {"confirmationToken": {"type": "string"}}
        })));
        let class = classified.of(&gated);
        assert!(class.token_gated && class.class.is_write(), "{class:?}");
        // An equal schema in another allocation is classified again, to the same answer.
        let mut copy = read.clone();
        copy.input_schema = Arc::new((*read.input_schema).clone());
        assert_eq!(classified.of(&copy).class, ToolClass::Read);
        assert_eq!(classified.entries.lock().len(), 1, "one entry per name");
    }

    #[test]
    fn the_kept_classifications_are_bounded_and_beyond_them_tools_are_classified_each_call() {
        let classified = Classified::default();
        for i in 0..Classified::MAX + 50 {
            let name: &'static str = Box::leak(format!("tool_{i}").into_boxed_str());
            let read = tool(
                name,
                json!({}),
                Some(ToolAnnotations::new().read_only(true)),
            );
            assert_eq!(classified.of(&read).class, ToolClass::Read);
            let write = tool(name, json!({}), None);
            assert!(classified.of(&write).class.is_write());
        }
        assert_eq!(classified.entries.lock().len(), Classified::MAX);
    }
}
