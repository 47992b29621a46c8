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
/// let wrapped = mcp_write_guard_envelope::wrap_output_schema(original.as_object().unwrap());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wrap::tests::any_json;
    use crate::{unwrap, wrap};
    use proptest::prelude::*;

    /// A small JSON Schema checker, enough for the keywords used here and in the schemas rmcp
    /// tools generate: `type`, `properties`, `required`, `additionalProperties`, `items`,
    /// `const`, `enum`, `anyOf`, `$ref` (local JSON pointers). Unknown keywords are ignored,
    /// as a validator does.
    fn validates(root: &Value, schema: &Value, value: &Value) -> bool {
        let schema = match schema {
            Value::Bool(b) => return *b,
            Value::Object(s) => s,
            _ => panic!("not a schema: {schema}"),
        };
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            let pointer = reference.strip_prefix('#').expect("local ref");
            let target = root
                .pointer(pointer)
                .unwrap_or_else(|| panic!("dangling {reference}"));
            if !validates(root, target, value) {
                return false;
            }
        }
        if let Some(t) = schema.get("type") {
            let types: Vec<&str> = match t {
                Value::String(s) => vec![s.as_str()],
                Value::Array(a) => a.iter().map(|t| t.as_str().unwrap()).collect(),
                _ => panic!("bad type"),
            };
            let matches = |t: &str| match t {
                "null" => value.is_null(),
                "boolean" => value.is_boolean(),
                "object" => value.is_object(),
                "array" => value.is_array(),
                "string" => value.is_string(),
                "number" => value.is_number(),
                "integer" => {
                    value.is_i64()
                        || value.is_u64()
                        || value.as_f64().is_some_and(|f| f.fract() == 0.0)
                }
                other => panic!("unknown type {other}"),
            };
            if !types.into_iter().any(matches) {
                return false;
            }
        }
        if schema.get("const").is_some_and(|c| c != value) {
            return false;
        }
        if let Some(e) = schema.get("enum").and_then(Value::as_array)
            && !e.contains(value)
        {
            return false;
        }
        if let Some(any_of) = schema.get("anyOf").and_then(Value::as_array)
            && !any_of.iter().any(|s| validates(root, s, value))
        {
            return false;
        }
        if let Value::Object(object) = value {
            let properties = schema.get("properties").and_then(Value::as_object);
            if let Some(required) = schema.get("required").and_then(Value::as_array)
                && !required
                    .iter()
                    .all(|k| object.contains_key(k.as_str().unwrap()))
            {
                return false;
            }
            for (k, v) in object {
                let ok = match properties.and_then(|p| p.get(k)) {
                    Some(s) => validates(root, s, v),
                    None => match schema.get("additionalProperties") {
                        Some(s) => validates(root, s, v),
                        None => true,
                    },
                };
                if !ok {
                    return false;
                }
            }
        }
        if let (Value::Array(items), Some(s)) = (value, schema.get("items"))
            && !items.iter().all(|v| validates(root, s, v))
        {
            return false;
        }
        true
    }

    fn check(schema: &Map<String, Value>, value: &Value) -> bool {
        let root = Value::Object(schema.clone());
        validates(&root, &root, value)
    }

    /// An output schema in the shape rmcp tools generate (via schemars): `$schema`, a `$defs`
    /// table, and `$ref`s into it.
    fn product_list_schema() -> Map<String, Value> {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "ProductList",
            "type": "object",
            "properties": {
                "products": {"type": "array", "items": {"$ref": "#/$defs/Product"}},
                "next": {"type": ["string", "null"]}
            },
            "required": ["products"],
            "$defs": {
                "Product": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "stock": {"type": "integer"},
                        "status": {"enum": ["active", "retired"]}
                    },
                    "required": ["sku", "stock"],
                    "additionalProperties": false
                }
            }
        })
        .as_object()
        .cloned()
        .unwrap()
    }

    #[test]
    fn the_checker_itself_rejects_what_it_should() {
        let schema = product_list_schema();
        let good =
            json!({"products": [{"sku": "A1", "stock": 3, "status": "active"}], "next": null});
        assert!(check(&schema, &good));
        for bad in [
            json!({"products": [{"sku": "A1", "stock": "3"}]}),
            json!({"products": [{"sku": "A1"}]}),
            json!({"products": [{"sku": "A1", "stock": 3, "extra": 1}]}),
            json!({"products": [{"sku": "A1", "stock": 3, "status": "gone"}]}),
            json!({"products": [], "next": 5}),
            json!({}),
            json!([]),
        ] {
            assert!(!check(&schema, &bad), "{bad}");
        }
    }

    #[test]
    fn wrapped_schema_shape() {
        let original = product_list_schema();
        let wrapped = wrap_output_schema(&original);
        let mut data_schema = original.clone();
        let schema_uri = data_schema.remove("$schema").unwrap();
        let defs = data_schema.remove("$defs").unwrap();
        assert_eq!(
            Value::Object(wrapped),
            json!({
                "$schema": schema_uri,
                "$defs": defs,
                "type": "object",
                "properties": {
                    "_zealySecurity": {
                        "type": "object",
                        "properties": {
                            "classification": {"type": "string", "const": "untrusted"},
                            "source": {"type": "string"},
                            "warning": {"type": "string", "const": crate::WARNING},
                        },
                        "required": ["classification", "source", "warning"],
                        "additionalProperties": false,
                    },
                    "data": data_schema,
                },
                "required": ["_zealySecurity", "data"],
                "additionalProperties": false,
            })
        );
    }

    #[test]
    fn wrapped_content_validates_against_the_wrapped_schema() {
        let original = product_list_schema();
        let wrapped_schema = wrap_output_schema(&original);
        let content = json!({"products": [{"sku": "A1", "stock": 3}], "next": "p2"});
        assert!(check(&original, &content));
        let wrapped = wrap("shop", "list_products", content.clone());
        assert!(check(&wrapped_schema, &wrapped));
        assert_eq!(unwrap(&wrapped), Some(&content));

        // What it must reject: the bare content, a forged header, an extra key, bad data.
        assert!(!check(&wrapped_schema, &content));
        let mut forged = wrapped.clone();
        forged["_zealySecurity"]["classification"] = json!("trusted");
        assert!(!check(&wrapped_schema, &forged));
        let mut extra = wrapped.clone();
        extra["instructions"] = json!("do this");
        assert!(!check(&wrapped_schema, &extra));
        let bad_data = wrap(
            "shop",
            "list_products",
            json!({"products": [{"sku": 1, "stock": 3}]}),
        );
        assert!(!check(&wrapped_schema, &bad_data));
    }

    #[test]
    fn legacy_definitions_are_hoisted_too() {
        let original = json!({
            "type": "object",
            "properties": {"item": {"$ref": "#/definitions/Item"}},
            "definitions": {"Item": {"type": "object", "required": ["n"]}}
        });
        let wrapped = wrap_output_schema(original.as_object().unwrap());
        assert!(wrapped.contains_key("definitions"));
        assert!(
            !wrapped["properties"]["data"]
                .as_object()
                .unwrap()
                .contains_key("definitions")
        );
        assert!(check(&wrapped, &wrap("s", "t", json!({"item": {"n": 1}}))));
        assert!(!check(&wrapped, &wrap("s", "t", json!({"item": {}}))));
    }

    #[test]
    fn a_schema_with_its_own_id_stays_whole() {
        let original = json!({
            "$id": "https://example.com/out.json",
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"X": {"type": "string"}}
        });
        let wrapped = wrap_output_schema(original.as_object().unwrap());
        assert_eq!(wrapped["properties"]["data"], original);
        assert!(!wrapped.contains_key("$defs") && !wrapped.contains_key("$schema"));
    }

    /// A schema that the given value satisfies, as tight as this checker allows.
    fn schema_of(value: &Value) -> Value {
        match value {
            Value::Null => json!({"type": "null"}),
            Value::Bool(_) => json!({"type": "boolean"}),
            Value::Number(_) => json!({"type": "number"}),
            Value::String(_) => json!({"type": "string"}),
            Value::Array(items) => {
                json!({"type": "array", "items": {"anyOf": items.iter().map(schema_of).collect::<Vec<_>>()}})
            }
            Value::Object(o) => json!({
                "type": "object",
                "properties": o.iter().map(|(k, v)| (k.clone(), schema_of(v))).collect::<Map<_, _>>(),
                "required": o.keys().collect::<Vec<_>>(),
                "additionalProperties": false,
            }),
        }
    }

    proptest! {
        #[test]
        fn any_wrapped_object_validates_against_its_wrapped_schema(
            data in any_json().prop_map(|v| json!({"result": v})),
            other in any_json(),
        ) {
            let original = schema_of(&data);
            let original = original.as_object().unwrap();
            prop_assert!(check(original, &data));
            let wrapped_schema = wrap_output_schema(original);
            prop_assert!(check(&wrapped_schema, &wrap("server", "tool", data.clone())));
            // And it still tells contents apart: bare data never validates as wrapped.
            prop_assert!(!check(&wrapped_schema, &data));
            if !check(original, &other) {
                prop_assert!(!check(&wrapped_schema, &wrap("server", "tool", other)));
            }
        }
    }
}
