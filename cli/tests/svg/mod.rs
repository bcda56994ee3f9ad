//! Reading the SVG that `--plot` writes, for the tests: a well-formedness check and the curves.

#![allow(dead_code, reason = "each test crate uses part of it")]

/// Panics unless `text` is one well-formed `<svg>` element: every tag closed in order, every
/// attribute quoted, every `&` an entity.
pub(crate) fn check_well_formed(text: &str) {
    let mut open: Vec<&str> = Vec::new();
    let mut rest = text.trim();
    assert!(rest.starts_with("<svg"), "no <svg> root");
    let mut roots = 0;
    while let Some(start) = rest.find('<') {
        check_text(&rest[..start]);
        let end = rest[start..].find('>').expect("unclosed tag") + start;
        let tag = &rest[start + 1..end];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(open.pop(), Some(name.trim()), "mismatched </{name}>");
        } else {
            let name = tag.split_whitespace().next().expect("empty tag");
            check_attributes(tag[name.len()..].trim_end_matches('/'));
            if open.is_empty() {
                roots += 1;
            }
            if !tag.ends_with('/') {
                open.push(name);
            }
        }
        rest = &rest[end + 1..];
    }
    assert!(open.is_empty(), "unclosed elements: {open:?}");
    assert_eq!(roots, 1, "more than one root element");
    check_text(rest);
}

fn check_text(text: &str) {
    for (i, _) in text.match_indices('&') {
        let entity = &text[i..];
        assert!(
            ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                .iter()
                .any(|e| entity.starts_with(e)),
            "a bare & in {text:?}"
        );
    }
}

/// `name="value"` pairs separated by white space, and nothing else.
fn check_attributes(mut attrs: &str) {
    loop {
        attrs = attrs.trim_start();
        if attrs.is_empty() {
            return;
        }
        let eq = attrs
            .find('=')
            .unwrap_or_else(|| panic!("no = in {attrs:?}"));
        let name = &attrs[..eq];
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-:_".contains(c)),
            "attribute name {name:?}"
        );
        let value = &attrs[eq + 1..];
        assert!(value.starts_with('"'), "unquoted attribute {name}");
        let close = value[1..].find('"').expect("unterminated attribute") + 1;
        check_text(&value[1..close]);
        assert!(!value[1..close].contains('<'), "< in attribute {name}");
        attrs = &value[close + 1..];
    }
}

/// Every `<polyline>`: its `<title>` (the curve's name) and its points, in SVG units.
pub(crate) fn polylines(text: &str) -> Vec<(String, Vec<(f64, f64)>)> {
    text.split("<polyline")
        .skip(1)
        .map(|element| {
            let element = &element[..element.find("</polyline>").expect("closed polyline")];
            let points = element.split(r#"points=""#).nth(1).expect("points");
            let points = points[..points.find('"').unwrap()]
                .split_whitespace()
                .map(|pair| {
                    let (x, y) = pair.split_once(',').expect("x,y");
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            let title = element
                .split("<title>")
                .nth(1)
                .and_then(|t| t.split("</title>").next())
                .unwrap_or("")
                .to_string();
            (title, points)
        })
        .collect()
}
