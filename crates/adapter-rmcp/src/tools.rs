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
/// decides), its digest read through `known`.
pub(crate) fn check_definition(
    known: &KnownTools,
    approved: &Approved,
    current: Option<&Tool>,
) -> Result<(), ToolChanged> {
    approved.check_definition_digest(current.map(|tool| known.digest(tool)))
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

/// What the guard derived from the tools a `tools/call` named (the classification, and for a
/// write the definition's digest), kept while the inner server hands out the very same tool. The
/// classification counts for a tool of the same name and annotations and the same input schema
/// allocation (every member it reads); the digest only for one that also has the same title and
/// description and the same output schema allocation (every member it counts,
/// [`ToolDefinition`]). The entry holds clones of the schemas' `Arc`s, so an allocation cannot
/// be changed, or freed and reused for another schema, while the entry lives; a schema that
/// changes is a new allocation. A read then costs a comparison instead of a walk through its
/// schema, and a write a comparison instead of two canonical forms of its definition. One entry
/// per name, at most [`Self::MAX`]; beyond, tools are read each call.
#[derive(Debug, Default)]
pub(crate) struct KnownTools {
    entries: parking_lot::Mutex<Vec<Known>>,
}

/// A tool as the guard read it, and what it derived from it.
#[derive(Debug)]
struct Known {
    name: Cow<'static, str>,
    title: Option<String>,
    description: Option<Cow<'static, str>>,
    input_schema: Arc<JsonObject>,
    output_schema: Option<Arc<JsonObject>>,
    annotations: Option<ToolAnnotations>,
    class: Classification,
    /// The definition's digest, once a write of the tool needed it.
    digest: Option<Result<DefinitionDigest, DefinitionError>>,
}

impl Known {
    fn new(tool: &Tool, class: Classification) -> Self {
        Self {
            name: tool.name.clone(),
            title: tool.title.clone(),
            description: tool.description.clone(),
            input_schema: Arc::clone(&tool.input_schema),
            output_schema: tool.output_schema.clone(),
            annotations: tool.annotations.clone(),
            class,
            digest: None,
        }
    }

    /// Whether `tool` has the name, annotations and input schema this entry was read from:
    /// every member the classification reads.
    fn classifies(&self, tool: &Tool) -> bool {
        self.name == tool.name
            && Arc::ptr_eq(&self.input_schema, &tool.input_schema)
            && self.annotations == tool.annotations
    }

    /// Whether `tool` is the very tool this entry was read from: every member the digest
    /// counts.
    fn is(&self, tool: &Tool) -> bool {
        let same_output = match (&self.output_schema, &tool.output_schema) {
            (None, None) => true,
            (Some(kept), Some(now)) => Arc::ptr_eq(kept, now),
            _ => false,
        };
        self.classifies(tool)
            && same_output
            && self.title == tool.title
            && self.description == tool.description
    }
}

impl KnownTools {
    const MAX: usize = 256;

    /// `tool`'s classification, from the entry of the same tool or classified now.
    pub(crate) fn class(&self, tool: &Tool) -> Classification {
        let entries = self.entries.lock();
        if let Some(known) = entries.iter().find(|known| known.classifies(tool)) {
            return known.class;
        }
        drop(entries);
        let class = classify_tool(tool);
        self.keep(Known::new(tool, class));
        class
    }

    /// The digest of `tool`'s definition ([`definition_digest`]), from the entry of the same
    /// tool or computed now.
    pub(crate) fn digest(&self, tool: &Tool) -> Result<DefinitionDigest, DefinitionError> {
        let kept = self
            .entries
            .lock()
            .iter()
            .find(|known| known.is(tool))
            .map(|known| (known.digest.clone(), known.class));
        if let Some((Some(digest), _)) = kept {
            return digest;
        }
        let digest = definition_digest(tool);
        let class = kept.map_or_else(|| classify_tool(tool), |(_, class)| class);
        self.keep(Known {
            digest: Some(digest.clone()),
            ..Known::new(tool, class)
        });
        digest
    }

    /// Keeps `known` in place of any entry of the same name, while there is room.
    fn keep(&self, known: Known) {
        let mut entries = self.entries.lock();
        entries.retain(|kept| kept.name != known.name);
        if entries.len() < Self::MAX {
            entries.push(known);
        }
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
        let known = KnownTools::default();
        let read = tool(
            "get_count",
            json!({"type": "object"}),
            Some(ToolAnnotations::new().read_only(true)),
        );
        assert_eq!(known.class(&read).class, ToolClass::Read);
        assert_eq!(known.class(&read.clone()).class, ToolClass::Read);
        assert_eq!(known.entries.lock().len(), 1);
        // Same name and schema, the annotations now say write: classified anew.
        let mut write = read.clone();
        write.annotations = Some(ToolAnnotations::new().read_only(false));
        assert!(known.class(&write).class.is_write());
        // Same name and annotations, a schema that now takes a token: classified anew, even
        // though the old schema's entry was for a read.
        let mut gated = read.clone();
        gated.input_schema = Arc::new(as_object(json!({
            "type": "object", "properties": {"confirmationToken": {"type": "string"}}
        })));
        let class = known.class(&gated);
        assert!(class.token_gated && class.class.is_write(), "{class:?}");
        // An equal schema in another allocation is classified again, to the same answer.
        let mut copy = read.clone();
        copy.input_schema = Arc::new((*read.input_schema).clone());
        assert_eq!(known.class(&copy).class, ToolClass::Read);
        assert_eq!(known.entries.lock().len(), 1, "one entry per name");
    }

    #[test]
    fn the_kept_classifications_are_bounded_and_beyond_them_tools_are_classified_each_call() {
        let known = KnownTools::default();
        for i in 0..KnownTools::MAX + 50 {
            let name: &'static str = Box::leak(format!("tool_{i}").into_boxed_str());
            let read = tool(
                name,
                json!({}),
                Some(ToolAnnotations::new().read_only(true)),
            );
            assert_eq!(known.class(&read).class, ToolClass::Read);
            let write = tool(name, json!({}), None);
            assert!(known.class(&write).class.is_write());
        }
        assert_eq!(known.entries.lock().len(), KnownTools::MAX);
    }

    #[test]
    fn a_kept_digest_counts_only_for_the_very_same_definition() {
        let known = KnownTools::default();
        let write = tool("set_count", json!({"type": "object"}), None);
        let digest = known.digest(&write).unwrap();
        assert_eq!(Ok(digest), definition_digest(&write));
        assert_eq!(known.digest(&write.clone()), Ok(digest), "kept");
        assert!(known.entries.lock()[0].digest.is_some());
        // Each member the digest counts, changed: a new digest, the one computed afresh.
        let mut retitled = write.clone();
        retitled.title = Some("Set".into());
        let mut redescribed = write.clone();
        redescribed.description = Some("Sets every count.".into());
        let mut output = write.clone();
        output.output_schema = Some(Arc::new(as_object(json!({"type": "object"}))));
        let mut reannotated = write.clone();
        reannotated.annotations = Some(ToolAnnotations::new().destructive(false));
        let mut reschemed = write.clone();
        reschemed.input_schema = Arc::new(as_object(json!({"type": "object", "required": []})));
        for changed in [retitled, redescribed, output, reannotated, reschemed] {
            let now = known.digest(&changed);
            assert_eq!(now, definition_digest(&changed));
            assert_ne!(now, Ok(digest), "{changed:?}");
            assert_eq!(
                known.digest(&write),
                Ok(digest),
                "the first again, read afresh"
            );
        }
        // A classification kept first gets its digest on the first write.
        let read = tool(
            "get_count",
            json!({}),
            Some(ToolAnnotations::new().read_only(true)),
        );
        assert_eq!(known.class(&read).class, ToolClass::Read);
        assert_eq!(known.digest(&read), definition_digest(&read));
        assert_eq!(known.class(&read).class, ToolClass::Read);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        /// One step of a server's tool list as the guard sees it, for a tool named `t`: the same
        /// tool again, or one member replaced.
        #[derive(Debug, Clone)]
        enum Step {
            Same,
            Title(Option<String>),
            Description(Option<String>),
            /// A new input schema allocation, with these contents.
            Input(bool),
            /// An output schema: none, a new allocation, or the one held before.
            Output(Option<bool>),
            ReadOnly(Option<bool>),
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                Just(Step::Same),
                proptest::option::of("[ab]{0,2}").prop_map(Step::Title),
                proptest::option::of("[ab]{0,2}").prop_map(Step::Description),
                any::<bool>().prop_map(Step::Input),
                proptest::option::of(any::<bool>()).prop_map(Step::Output),
                proptest::option::of(any::<bool>()).prop_map(Step::ReadOnly),
            ]
        }

        fn schema(gated: bool) -> Arc<JsonObject> {
            let property = if gated { "confirmationToken" } else { "n" };
            Arc::new(as_object(
                json!({"type": "object", "properties": {property: {"type": "string"}}}),
            ))
        }

        proptest! {
            /// Whatever the inner server hands out, in whatever order, what the guard keeps
            /// answers exactly what reading the tool afresh answers.
            #[test]
            fn kept_answers_are_fresh_answers(steps in proptest::collection::vec(step(), 1..24)) {
                let known = KnownTools::default();
                let mut tool = Tool::new("t", "d", as_object(json!({})));
                let spare = Arc::new(as_object(json!({"type": "object"})));
                for step in steps {
                    match step {
                        Step::Same => {}
                        Step::Title(title) => tool.title = title,
                        Step::Description(d) => tool.description = d.map(Into::into),
                        Step::Input(gated) => tool.input_schema = schema(gated),
                        Step::Output(None) => tool.output_schema = None,
                        Step::Output(Some(true)) => tool.output_schema = Some(Arc::clone(&spare)),
                        Step::Output(Some(false)) => {
                            tool.output_schema = Some(Arc::new(as_object(json!({"n": 1}))));
                        }
                        Step::ReadOnly(hint) => {
                            tool.annotations = hint.map(|h| ToolAnnotations::new().read_only(h));
                        }
                    }
                    prop_assert_eq!(known.class(&tool), classify_tool(&tool));
                    prop_assert_eq!(known.digest(&tool), definition_digest(&tool));
                }
            }
        }
    }
}
