//! The SVG chart of dev perplexity per row, the paper's against ours. Each series has its
//! own axis (the paper's on the left, ours on the right): a reduced run's perplexities sit
//! far above the paper's, and what the rows should share is their order, not their level.

/// `points`: (row, paper's PPL, ours if measured), in the table's order.
pub fn ppl_chart(points: &[(&str, f64, Option<f64>)], scale: &str) -> String {
    let (w, h) = (760.0, 340.0);
    let (left, right, top, bottom) = (60.0, 60.0, 40.0, 50.0);
    let plot_w = w - left - right;
    let plot_h = h - top - bottom;
    let range = |values: &mut dyn Iterator<Item = f64>| -> (f64, f64) {
        let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        if !lo.is_finite() {
            return (0.0, 1.0);
        }
        let pad = ((hi - lo) * 0.08).max(0.05);
        (lo - pad, hi + pad)
    };
    let paper = range(&mut points.iter().map(|p| p.1));
    let ours = range(&mut points.iter().filter_map(|p| p.2));
    let n = points.len().max(1) as f64;
    let x = |i: usize| left + plot_w * (i as f64 + 0.5) / n;
    let y = |v: f64, (lo, hi): (f64, f64)| top + plot_h * (1.0 - (v - lo) / (hi - lo));
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <title>Table 3: dev perplexity per row, the paper's and ours (scale {scale})</title>\n\
         <rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"13\">Dev perplexity per \
         row: the paper (left axis) and ours at scale {scale} (right axis)</text>\n",
        w / 2.0
    );
    // Axes with five ticks each.
    svg.push_str(&format!(
        "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{}\" stroke=\"#1f77b4\"/>\n\
         <line x1=\"{}\" y1=\"{top}\" x2=\"{}\" y2=\"{}\" stroke=\"#d62728\"/>\n\
         <line x1=\"{left}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#444\"/>\n",
        top + plot_h,
        left + plot_w,
        left + plot_w,
        top + plot_h,
        top + plot_h,
        left + plot_w,
        top + plot_h
    ));
    for k in 0..=4 {
        let f = k as f64 / 4.0;
        let ty = top + plot_h * (1.0 - f);
        let pv = paper.0 + (paper.1 - paper.0) * f;
        let ov = ours.0 + (ours.1 - ours.0) * f;
        svg.push_str(&format!(
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#1f77b4\">{pv:.2}</text>\n\
             <text x=\"{}\" y=\"{:.1}\" fill=\"#d62728\">{ov:.2}</text>\n",
            left - 4.0,
            ty + 4.0,
            left + plot_w + 4.0,
            ty + 4.0
        ));
    }
    for (i, (name, _, _)) in points.iter().enumerate() {
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{name}</text>\n",
            x(i),
            top + plot_h + 16.0
        ));
    }
    let series = |values: Vec<(usize, f64)>, axis: (f64, f64), color: &str, label: &str| {
        let coords: Vec<String> = values
            .iter()
            .map(|&(i, v)| format!("{:.1},{:.1}", x(i), y(v, axis)))
            .collect();
        let mut s = format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-opacity=\"0.4\"/>\n",
            coords.join(" ")
        );
        for &(i, v) in &values {
            s.push_str(&format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{color}\">\
                 <title>{} {label}: {v:.2}</title></circle>\n",
                x(i),
                y(v, axis),
                points[i].0
            ));
        }
        s
    };
    svg.push_str(&series(
        points.iter().enumerate().map(|(i, p)| (i, p.1)).collect(),
        paper,
        "#1f77b4",
        "paper",
    ));
    svg.push_str(&series(
        points
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.2.map(|v| (i, v)))
            .collect(),
        ours,
        "#d62728",
        "ours",
    ));
    svg.push_str(&format!(
        "<text x=\"{left}\" y=\"{}\" fill=\"#1f77b4\">● the paper (newstest2013)</text>\n\
         <text x=\"{}\" y=\"{}\" fill=\"#d62728\">● ours</text>\n</svg>\n",
        h - 10.0,
        left + 200.0,
        h - 10.0
    ));
    svg
}
