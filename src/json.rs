//! A minimal JSON writer for `summary.json` (objects, numbers, strings, null),
//! so the CLI needs no serialisation dependency.

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// A number; NaN and ±∞ are written as `null` (JSON has no such numbers).
    Num(f64),
    /// An unsigned integer.
    Int(u64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Json>),
    /// An object, keys in the given order.
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// `Some(x)` → number, `None` → null.
    pub fn opt(x: Option<f64>) -> Json {
        x.map_or(Json::Null, Json::Num)
    }

    /// Serialises with two-space indentation.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, 0);
        out.push('\n');
        out
    }

    fn write(&self, out: &mut String, indent: usize) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Num(x) if x.is_finite() => out.push_str(&format!("{x:?}")),
            Json::Num(_) => out.push_str("null"),
            Json::Int(k) => out.push_str(&k.to_string()),
            Json::Str(s) => write_str(out, s),
            Json::Arr(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    v.write(out, indent);
                }
                out.push(']');
            }
            Json::Obj(fields) => {
                out.push_str("{\n");
                for (i, (k, v)) in fields.iter().enumerate() {
                    out.push_str(&" ".repeat(indent + 2));
                    write_str(out, k);
                    out.push_str(": ");
                    v.write(out, indent + 2);
                    if i + 1 < fields.len() {
                        out.push(',');
                    }
                    out.push('\n');
                }
                out.push_str(&" ".repeat(indent));
                out.push('}');
            }
        }
    }
}

fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_valid_json() {
        let v = Json::Obj(vec![
            ("m".into(), Json::Int(47)),
            ("e".into(), Json::Num(1.25e-17)),
            ("bad".into(), Json::Num(f64::NAN)),
            ("none".into(), Json::opt(None)),
            ("s".into(), Json::Str("a\"b\\c\n".into())),
            (
                "t".into(),
                Json::Obj(vec![(
                    "x".into(),
                    Json::Arr(vec![Json::Num(0.5), Json::Int(2)]),
                )]),
            ),
        ]);
        let s = v.render();
        assert!(s.contains("\"m\": 47,"));
        assert!(s.contains("\"e\": 1.25e-17,"));
        assert!(s.contains("\"bad\": null,"));
        assert!(s.contains("\"none\": null,"));
        assert!(s.contains(r#""s": "a\"b\\c\n","#));
        assert!(s.contains("\"x\": [0.5, 2]"));
        assert!(s.trim_end().ends_with('}'));
    }
}
