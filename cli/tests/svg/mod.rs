//! Reading the SVG that `--plot` writes, for the tests, with an XML parser (roxmltree): a
//! well-formedness check and the curves.

#![allow(dead_code, reason = "each test crate uses part of it")]

/// Panics unless `text` is one well-formed XML document (read by a real parser: every tag
/// closed in order, every attribute quoted, every `&` an entity) whose root is an `<svg>`
/// element in the SVG namespace, with a `<title>` and at least one drawn shape.
pub(crate) fn check_well_formed(text: &str) {
    let doc = roxmltree::Document::parse(text).unwrap_or_else(|e| panic!("not XML: {e}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "svg", "the root is not <svg>");
    assert_eq!(
        root.tag_name().namespace(),
        Some("http://www.w3.org/2000/svg"),
        "<svg> outside the SVG namespace"
    );
    let names: Vec<&str> = root
        .descendants()
        .filter(|n| n.is_element())
        .map(|n| n.tag_name().name())
        .collect();
    assert!(names.contains(&"title"), "no <title>: {names:?}");
    assert!(
        names
            .iter()
            .any(|n| ["polyline", "rect", "line", "circle"].contains(n)),
        "nothing drawn: {names:?}"
    );
}

/// Every `<polyline>`: its `<title>` (the curve's name) and its points, in SVG units.
pub(crate) fn polylines(text: &str) -> Vec<(String, Vec<(f64, f64)>)> {
    let doc = roxmltree::Document::parse(text).unwrap_or_else(|e| panic!("not XML: {e}"));
    doc.descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .map(|line| {
            let points = line
                .attribute("points")
                .expect("points")
                .split_whitespace()
                .map(|pair| {
                    let (x, y) = pair.split_once(',').expect("x,y");
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            let title = line
                .children()
                .find(|n| n.has_tag_name("title"))
                .and_then(|n| n.text())
                .unwrap_or("")
                .to_string();
            (title, points)
        })
        .collect()
}
