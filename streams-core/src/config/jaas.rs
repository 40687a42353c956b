//! Java's JAAS configuration text (`sasl.jaas.config`): one login module entry,
//! `<module> <flag> [<name>=<value>]... ;`, its values bare or double-quoted with `\`
//! escapes. Errors name options, never their values: most of them are secrets.

/// One JAAS login module entry: `<module> <flag> [<name>=<value>]... ;`.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct JaasEntry {
    pub(super) module: String,
    pub(super) options: Vec<(String, String)>,
}

impl JaasEntry {
    /// The value of option `name`.
    pub(super) fn option(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses `text`, one entry; the error says what is malformed without quoting a value.
pub(super) fn parse_jaas(text: &str) -> Result<JaasEntry, String> {
    let mut chars = text.trim().chars().peekable();
    let word = |chars: &mut std::iter::Peekable<std::str::Chars<'_>>| {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut w = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_whitespace() && *c != ';' && *c != '=') {
            w.push(c);
        }
        w
    };
    let module = word(&mut chars);
    if module.is_empty() {
        return Err("the JAAS configuration names no login module".into());
    }
    let flag = word(&mut chars);
    if !["required", "requisite", "sufficient", "optional"].contains(&flag.as_str()) {
        return Err(format!(
            "the JAAS configuration of `{module}` has no control flag (`required`) after the module name"
        ));
    }
    let mut options = Vec::new();
    loop {
        let name = word(&mut chars);
        if name.is_empty() {
            while chars.next_if(|c| c.is_whitespace()).is_some() {}
            return match chars.next() {
                Some(';') | None => {
                    if chars.any(|c| !c.is_whitespace()) {
                        Err("the JAAS configuration has more than one entry; only one is supported".into())
                    } else {
                        Ok(JaasEntry { module, options })
                    }
                }
                Some(_) => Err("the JAAS configuration is malformed (an option without a name)".into()),
            };
        }
        if chars.next() != Some('=') {
            return Err(format!("the JAAS option `{name}` has no `=value`"));
        }
        let value = if chars.next_if_eq(&'"').is_some() {
            let mut v = String::new();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some(c) => v.push(c),
                        None => return Err(format!("the JAAS option `{name}` has an unterminated value")),
                    },
                    Some(c) => v.push(c),
                    None => return Err(format!("the JAAS option `{name}` has an unterminated value")),
                }
            }
            v
        } else {
            word(&mut chars)
        };
        options.push((name, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAM_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

    #[test]
    fn jaas_entries_are_parsed_with_quoted_and_bare_values() {
        let e = parse_jaas(
            r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="app" password="p \"w\";=d" tokenauth=true;"#,
        )
        .unwrap();
        assert_eq!(e.module, SCRAM_MODULE);
        assert_eq!(
            e.options,
            vec![
                ("username".into(), "app".into()),
                ("password".into(), r#"p "w";=d"#.into()),
                ("tokenauth".into(), "true".into())
            ]
        );
        assert!(parse_jaas("").is_err());
        assert!(parse_jaas("Module").is_err());
        assert!(parse_jaas(r#"M required a="unterminated"#).is_err());
        assert!(parse_jaas(r#"M required a="1"; N required b="2";"#).is_err());
        assert_eq!(parse_jaas("M required").unwrap().options, vec![]);
    }
}
