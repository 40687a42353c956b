//! One evaluation of every panel's queries, with the dashboard's variables resolved as
//! Grafana resolves them, and the table that reports it.

use std::fmt::Write as _;

use crate::RATE_INTERVAL;
use crate::dashboard::{Panel, UNKNOWN_VARIABLE, Variable, substitute};
use crate::prometheus::{Answer, Prometheus};

/// One evaluation of every panel.
pub(crate) struct Evaluation {
    /// Variable name and the value it stood for, or why it has none yet.
    variables: Vec<(String, Result<String, String>)>,
    /// Per panel: per query, the query as sent and its answer or the error.
    panels: Vec<Vec<(String, Result<Answer, String>)>>,
}

impl Evaluation {
    pub(crate) fn run(
        prometheus: &Prometheus,
        panels: &[Panel],
        variables: &[Variable],
        application_id: &str,
    ) -> Self {
        let mut values: Vec<(String, String)> = vec![
            ("__rate_interval".into(), RATE_INTERVAL.into()),
            ("__interval".into(), RATE_INTERVAL.into()),
        ];
        let mut resolved = Vec::new();
        for v in variables {
            let value = v
                .selector
                .as_deref()
                .map(|s| substitute(s, &values))
                .transpose()
                .and_then(|selector| prometheus.label_values(&v.label, selector.as_deref()))
                .and_then(|offered| {
                    if offered.is_empty() {
                        return Err("its query offers no value yet".into());
                    }
                    Ok(match &v.all_value {
                        Some(all) => all.clone(),
                        // This Prometheus scrapes only the application under test.
                        None if offered.iter().any(|o| o == application_id) => application_id.to_owned(),
                        None => offered[0].clone(),
                    })
                });
            if let Ok(value) = &value {
                values.push((v.name.clone(), value.clone()));
            }
            resolved.push((v.name.clone(), value));
        }
        let panels = panels
            .iter()
            .map(|p| {
                p.exprs
                    .iter()
                    .map(|e| match substitute(e, &values) {
                        Ok(q) => {
                            let r = prometheus.query(&q);
                            (q, r)
                        }
                        Err(why) => (e.clone(), Err(why)),
                    })
                    .collect()
            })
            .collect();
        Self {
            variables: resolved,
            panels,
        }
    }

    /// Whether panel `i` shows data: one of its queries returned a number.
    fn shows_data(&self, i: usize) -> bool {
        self.panels[i]
            .iter()
            .any(|(_, r)| matches!(r, Ok(a) if a.numbers > 0))
    }

    /// Why this evaluation can never pass however long the test waits: a query that
    /// Prometheus rejects, or one with a variable the dashboard does not define. (While a
    /// variable has no value yet, the queries using it wait with it.)
    pub(crate) fn fatal(&self) -> Option<String> {
        let pending = self.variables.iter().any(|(_, v)| v.is_err());
        self.panels.iter().flatten().find_map(|(q, r)| match r {
            Err(e) if pending && e.starts_with(UNKNOWN_VARIABLE) => None,
            Err(e) => Some(format!("{q}: {e}")),
            Ok(_) => None,
        })
    }

    pub(crate) fn all_show_data(&self) -> bool {
        (0..self.panels.len()).all(|i| self.shows_data(i))
    }

    /// The table: each panel, each of its queries with the series it returned.
    pub(crate) fn table(&self, panels: &[Panel]) -> String {
        let mut out = String::new();
        for (name, value) in &self.variables {
            let _ = writeln!(
                out,
                "variable ${name} = {}",
                match value {
                    Ok(v) => v.clone(),
                    Err(e) => format!("(none: {e})"),
                }
            );
        }
        let width = panels.iter().map(|p| p.title.len()).max().unwrap_or(0);
        let _ = writeln!(
            out,
            "{:<4} {:<width$}  {:>7}  {:>10}  query",
            "", "panel", "series", "max"
        );
        for (i, (panel, queries)) in panels.iter().zip(&self.panels).enumerate() {
            let mark = if self.shows_data(i) { "ok" } else { "NO" };
            for (n, (query, result)) in queries.iter().enumerate() {
                let title = if n == 0 { panel.title.as_str() } else { "" };
                let (series, max) = match result {
                    Ok(a) if a.series == a.numbers => (format!("{}", a.series), a.max),
                    Ok(a) => (format!("{}/{}", a.numbers, a.series), a.max),
                    Err(_) => ("error".into(), None),
                };
                let max = match max {
                    None => "-".into(),
                    Some(m) if m == 0.0 || m.abs() >= 0.01 => format!("{m:.3}"),
                    Some(m) => format!("{m:.2e}"),
                };
                let mark = if n == 0 { mark } else { "" };
                let _ = write!(out, "{mark:<4} {title:<width$}  {series:>7}  {max:>10}  {query}");
                if let Err(e) = result {
                    let _ = write!(out, "  ({e})");
                }
                out.push('\n');
            }
        }
        let shown = (0..self.panels.len()).filter(|&i| self.shows_data(i)).count();
        let _ = writeln!(
            out,
            "{shown} of {} panels show data (series: returned, or with a number/returned where \
             some are NaN; max: the largest value)",
            self.panels.len()
        );
        out
    }
}
