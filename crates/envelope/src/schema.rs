//! The output-schema rewrite.

use serde_json::{Map, Value, json};

use crate::wrap::{CLASSIFICATION, DATA_KEY, ENVELOPE_KEY, WARNING};

/// Keys that must stay at the root of a schema document for references into them to resolve.
const ROOT_KEYS: [&str; 3] = ["$schema", "$defs", "definitions"];

/// The schema of a wrapped result, from a tool's `outputSchema`.
///
/// The result is an object schema that requires exactly `_zealySecurity` (the header, with
/// `classification` fixed to `"untrusted"` and `warning` fixed to [`WARNING`](crate::WARNING))
/// and `data`, whose schema is the original one. A wrapped `structuredContent` therefore still
/// validates against what `tools/list` advertises.
///
/// `$schema`, `$defs` and `definitions` are moved from the original to the root of the new
/// schema, so that references such as `#/$defs/Item` still resolve. A schema with its own `$id`
/// is left whole under `data`, where it remains its own resource.
///
/// ```
/// let original = serde_json::json!({"type": "object", "properties": {"stock": {"type": "integer"}}});
/// let wrapped = envelope::wrap_output_schema(original.as_object().unwrap());
/// assert_eq!(wrapped["type"], "object");
/// assert_eq!(wrapped["required"], serde_json::json!(["_zealySecurity", "data"]));
/// assert_eq!(wrapped["properties"]["data"], original);
/// ```
pub fn wrap_output_schema(schema: &Map<String, Value>) -> Map<String, Value> {
    let mut data = schema.clone();
    let mut wrapped = Map::new();
    if !data.contains_key("$id") {
        for key in ROOT_KEYS {
            if let Some(value) = data.remove(key) {
                wrapped.insert(key.to_owned(), value);
            }
        }
    }
    let header = json!({
        "type": "object",
        "properties": {
            "classification": {"type": "string", "const": CLASSIFICATION},
            "source": {"type": "string"},
            "warning": {"type": "string", "const": WARNING},
        },
        "required": ["classification", "source", "warning"],
        "additionalProperties": false,
    });
    let mut properties = Map::new();
    properties.insert(ENVELOPE_KEY.to_owned(), header);
    properties.insert(DATA_KEY.to_owned(), Value::Object(data));
    wrapped.insert("type".into(), Value::from("object"));
    wrapped.insert("properties".into(), Value::Object(properties));
    wrapped.insert("required".into(), json!([ENVELOPE_KEY, DATA_KEY]));
    wrapped.insert("additionalProperties".into(), Value::Bool(false));
    wrapped
}
