//! The topology as a diagram: a Mermaid flowchart of a [`TopologyDescription`].

use super::describe::TopologyDescription;

impl TopologyDescription {
    /// The topology as a Mermaid flowchart: one subgraph per sub-topology, topics as
    /// stadium shapes, stores as cylinders.
    pub fn to_mermaid(&self) -> String {
        let id = |s: &str| s.replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_");
        let mut out = String::from("flowchart TB\n");
        for sub in &self.subtopologies {
            out.push_str(&format!(
                "  subgraph sub{}[\"Sub-topology: {}\"]\n",
                sub.id, sub.id
            ));
            for n in &sub.nodes {
                out.push_str(&format!("    {}[\"{}: {}\"]\n", id(&n.name), n.kind, n.name));
            }
            out.push_str("  end\n");
            for n in &sub.nodes {
                for c in &n.successors {
                    out.push_str(&format!("  {} --> {}\n", id(&n.name), id(c)));
                }
                match n.kind {
                    "Source" => n.detail.iter().for_each(|t| {
                        out.push_str(&format!("  topic_{}([\"{}\"]) --> {}\n", id(t), t, id(&n.name)));
                    }),
                    "Sink" => n.detail.iter().for_each(|t| {
                        out.push_str(&format!("  {} --> topic_{}([\"{}\"])\n", id(&n.name), id(t), t));
                    }),
                    _ => n.detail.iter().for_each(|s| {
                        out.push_str(&format!("  {} --- store_{}[(\"{}\")]\n", id(&n.name), id(s), s));
                    }),
                }
            }
        }
        out
    }
}
