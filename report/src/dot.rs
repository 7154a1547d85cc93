//! `\dot FILE EDGES_SQL [; NODES_SQL]`: a query result as a Graphviz DOT digraph, for the
//! communication-dependency DAG (`dag_edges`, `dag_nodes`), the region graph or any pairs.
//! Edges: the first two columns are the endpoints; a `latency` or `mean_latency` column colours
//! the edge by latency L (green up to 1, orange up to 2, red above, grey without one) and
//! labels it, unless a `label` column gives the label. Nodes (optional second query): the first
//! column is the id, `label` the label, `load_balance` or `lb` the fill (white up to 1, light
//! orange up to 2, light red above), so unbalanced ranks stand out.

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type};

/// Text of every row of column `index`.
fn strings(batches: &[RecordBatch], index: usize) -> Result<Vec<Option<String>>, String> {
    let mut out = Vec::new();
    for b in batches {
        let col = cast(b.column(index), &DataType::Utf8).map_err(|e| e.to_string())?;
        let s = col.as_string::<i32>();
        out.extend((0..s.len()).map(|i| s.is_valid(i).then(|| s.value(i).to_string())));
    }
    Ok(out)
}

fn floats(batches: &[RecordBatch], index: usize) -> Result<Vec<Option<f64>>, String> {
    let mut out = Vec::new();
    for b in batches {
        let col: ArrayRef = cast(b.column(index), &DataType::Float64).map_err(|e| e.to_string())?;
        out.extend(col.as_primitive::<Float64Type>().iter());
    }
    Ok(out)
}

fn find(batches: &[RecordBatch], names: &[&str]) -> Option<usize> {
    let schema = batches.first()?.schema();
    names.iter().find_map(|n| schema.index_of(n).ok())
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn latency_colour(l: Option<f64>) -> &'static str {
    match l {
        None => "#9e9e9e",
        Some(l) if l <= 1.0 => "#2e7d32",
        Some(l) if l <= 2.0 => "#ef6c00",
        Some(_) => "#c62828",
    }
}

fn balance_fill(lb: Option<f64>) -> &'static str {
    match lb {
        Some(v) if v > 2.0 => "#ffcdd2",
        Some(v) if v > 1.0 => "#ffe0b2",
        _ => "#ffffff",
    }
}

/// The DOT text, and the numbers of nodes and edges written.
pub fn render(edges: &[RecordBatch], nodes: Option<&[RecordBatch]>) -> Result<(String, usize, usize), String> {
    let columns = edges.first().map_or(0, |b| b.num_columns());
    if columns < 2 && !edges.is_empty() {
        return Err("\\dot: the edge query must return at least two columns (from, to)".into());
    }
    let mut out = String::from("digraph commdb {\n  node [shape=box, style=filled, fillcolor=\"#ffffff\"];\n");
    let mut node_count = 0;
    if let Some(nodes) = nodes
        && !nodes.is_empty()
    {
        let ids = strings(nodes, 0)?;
        let labels = match find(nodes, &["label"]) {
            Some(i) => strings(nodes, i)?,
            None => ids.clone(),
        };
        let lb = match find(nodes, &["load_balance", "lb"]) {
            Some(i) => floats(nodes, i)?,
            None => vec![None; ids.len()],
        };
        for ((id, label), lb) in ids.iter().zip(&labels).zip(&lb) {
            let Some(id) = id else { continue };
            let label = label.as_deref().unwrap_or(id);
            out += &format!("  {} [label={}, fillcolor=\"{}\"];\n", quote(id), quote(label), balance_fill(*lb));
            node_count += 1;
        }
    }
    let mut edge_count = 0;
    if !edges.is_empty() {
        let (from, to) = (strings(edges, 0)?, strings(edges, 1)?);
        let latency = match find(edges, &["latency", "mean_latency"]) {
            Some(i) => Some(floats(edges, i)?),
            None => None,
        };
        let labels = match find(edges, &["label"]) {
            Some(i) => Some(strings(edges, i)?),
            None => None,
        };
        for row in 0..from.len() {
            let (Some(a), Some(b)) = (&from[row], &to[row]) else { continue };
            let l = latency.as_ref().and_then(|v| v[row]);
            let label = match (&labels, l) {
                (Some(ls), _) => ls[row].clone().unwrap_or_default(),
                (None, Some(l)) => format!("L={l:.2}"),
                (None, None) => String::new(),
            };
            out += &format!(
                "  {} -> {} [color=\"{}\", label={}];\n",
                quote(a),
                quote(b),
                if latency.is_some() { latency_colour(l) } else { "#000000" },
                quote(&label)
            );
            edge_count += 1;
        }
    }
    out += "}\n";
    Ok((out, node_count, edge_count))
}

/// `EDGES_SQL [; NODES_SQL]`: split at the first ';' outside quotes.
pub fn split_queries(text: &str) -> (String, Option<String>) {
    let mut quote: Option<char> = None;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, ';') => {
                let rest = text[i + 1..].trim().trim_end_matches(';').trim();
                return (text[..i].trim().to_string(), (!rest.is_empty()).then(|| rest.to_string()));
            }
            _ => {}
        }
    }
    (text.trim().to_string(), None)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    use super::*;

    #[test]
    fn edges_coloured_by_latency_and_nodes_by_balance() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("from_node", DataType::Int64, false),
            Field::new("to_node", DataType::Int64, false),
            Field::new("latency", DataType::Float64, true),
        ]));
        let edges = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![0, 1, 2])),
                Arc::new(Int64Array::from(vec![1, 2, 0])),
                Arc::new(Float64Array::from(vec![Some(0.9), Some(3.5), None])),
            ],
        )
        .unwrap();
        let nschema = Arc::new(Schema::new(vec![
            Field::new("node_id", DataType::Int64, false),
            Field::new("label", DataType::Utf8, false),
            Field::new("load_balance", DataType::Float64, false),
        ]));
        let nodes = RecordBatch::try_new(
            nschema,
            vec![
                Arc::new(Int64Array::from(vec![0, 1])),
                Arc::new(StringArray::from(vec!["rank \"0\"", "rank 1"])),
                Arc::new(Float64Array::from(vec![0.5, 2.5])),
            ],
        )
        .unwrap();
        let (dot, n, e) = render(&[edges], Some(&[nodes])).unwrap();
        assert_eq!((n, e), (2, 3));
        assert!(dot.contains("\"0\" [label=\"rank \\\"0\\\"\", fillcolor=\"#ffffff\"];"), "{dot}");
        assert!(dot.contains("\"1\" [label=\"rank 1\", fillcolor=\"#ffcdd2\"];"), "{dot}");
        assert!(dot.contains("\"0\" -> \"1\" [color=\"#2e7d32\", label=\"L=0.90\"];"), "{dot}");
        assert!(dot.contains("\"1\" -> \"2\" [color=\"#c62828\", label=\"L=3.50\"];"), "{dot}");
        assert!(dot.contains("\"2\" -> \"0\" [color=\"#9e9e9e\", label=\"\"];"), "{dot}");
    }

    #[test]
    fn queries_split_outside_quotes() {
        assert_eq!(
            split_queries("SELECT ';' FROM x; SELECT 1;"),
            ("SELECT ';' FROM x".into(), Some("SELECT 1".into()))
        );
        assert_eq!(split_queries("SELECT 1"), ("SELECT 1".into(), None));
    }
}
