//! The dashboard as written: its panels with their queries, its template variables, and
//! the substitution of variables into queries.

use serde_json::Value;

/// How [`substitute`] says a variable is left.
pub(crate) const UNKNOWN_VARIABLE: &str = "unknown variable";

/// One panel of the dashboard with its queries, as written (variables not substituted).
#[derive(Debug)]
pub(crate) struct Panel {
    pub(crate) title: String,
    pub(crate) exprs: Vec<String>,
}

/// Every panel but rows and text panels (which show no query), nested panels included, in
/// dashboard order. A panel of another type without a query fails the test.
pub(crate) fn panels(dashboard: &Value) -> Vec<Panel> {
    fn walk(list: &[Value], out: &mut Vec<Panel>) {
        for p in list {
            let kind = p["type"].as_str().unwrap_or_default();
            let title = p["title"].as_str().unwrap_or_default().to_owned();
            if let Some(nested) = p["panels"].as_array() {
                walk(nested, out);
            }
            if matches!(kind, "row" | "text") {
                continue;
            }
            let exprs: Vec<String> = p["targets"]
                .as_array()
                .map(|targets| {
                    targets
                        .iter()
                        .filter_map(|t| t["expr"].as_str())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            assert!(
                !exprs.is_empty(),
                "panel {title:?} ({kind}) has no PromQL query (targets[].expr): it can never show data"
            );
            out.push(Panel { title, exprs });
        }
    }
    let mut out = Vec::new();
    walk(
        dashboard["panels"]
            .as_array()
            .expect("the dashboard has a panels array"),
        &mut out,
    );
    out
}

/// A query variable of the dashboard: `label_values(<selector>, <label>)`.
#[derive(Debug)]
pub(crate) struct Variable {
    pub(crate) name: String,
    pub(crate) label: String,
    /// The series selector, variables not substituted; `None` for `label_values(<label>)`.
    pub(crate) selector: Option<String>,
    /// What "All" stands for, where the variable offers it.
    pub(crate) all_value: Option<String>,
}

/// The dashboard's template variables that queries can use. Data-source variables are left
/// out (they pick Prometheus, not a value); any type other than `query` fails the test, so
/// a variable added later gets a substitution here.
pub(crate) fn variables(dashboard: &Value) -> Vec<Variable> {
    let list = dashboard["templating"]["list"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    for v in list {
        let name = v["name"].as_str().expect("a variable has a name").to_owned();
        match v["type"].as_str().unwrap_or_default() {
            "datasource" => continue,
            "query" => {}
            other => panic!("variable {name}: type {other:?} is not substituted by this test yet"),
        }
        let definition = v["definition"]
            .as_str()
            .or_else(|| v["query"]["query"].as_str())
            .or_else(|| v["query"].as_str())
            .unwrap_or_default()
            .trim();
        let args = definition
            .strip_prefix("label_values(")
            .and_then(|rest| rest.strip_suffix(')'))
            .unwrap_or_else(|| panic!("variable {name}: {definition:?} is not label_values(...)"));
        let (selector, label) = match args.rsplit_once(',') {
            Some((selector, label)) => (Some(selector.trim().to_owned()), label.trim().to_owned()),
            None => (None, args.trim().to_owned()),
        };
        let all_value = (v["includeAll"].as_bool() == Some(true))
            .then(|| v["allValue"].as_str().map(str::to_owned))
            .flatten();
        out.push(Variable {
            name,
            label,
            selector,
            all_value,
        });
    }
    out
}

/// `text` with each `$name` and `${name}` of `values` replaced; fails on a variable left.
pub(crate) fn substitute(text: &str, values: &[(String, String)]) -> Result<String, String> {
    let mut sorted: Vec<&(String, String)> = values.iter().collect();
    // Longer names first, so `$a` never eats the start of `$ab`.
    sorted.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
    let mut out = text.to_owned();
    for (name, value) in sorted {
        out = out.replace(&format!("${{{name}}}"), value);
        out = out.replace(&format!("${name}"), value);
    }
    match out.find('$') {
        Some(at) => Err(format!("{UNKNOWN_VARIABLE} at {:?} in {text:?}", &out[at..])),
        None => Ok(out),
    }
}
