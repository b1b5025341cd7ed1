//! A trace id as the pages show it: a link built from `[server] trace_url` when one is
//! configured, the id as plain text without it.

use crate::config::TraceUrl;
use crate::document::esc;
use crate::metrics::TraceContext;

/// The HTML for `trace_id` (and its span), opening in a new tab when linked.
pub(crate) fn html(url: Option<&TraceUrl>, trace_id: &str, span_id: Option<&str>) -> String {
    let short = trace_id.get(..16).unwrap_or(trace_id);
    let Some(url) = url else {
        return format!(
            r#"<code class="trace" title="trace {id}">{id}</code>"#,
            id = esc(trace_id)
        );
    };
    let Some(trace) = TraceContext::new(trace_id, span_id) else {
        return format!(r#"<code class="trace">{}</code>"#, esc(trace_id));
    };
    format!(
        r#"<a class="trace" href="{href}" target="_blank" rel="noopener noreferrer" title="trace {id}">trace {short}…</a>"#,
        href = esc(&url.link(&trace)),
        id = esc(trace_id),
        short = esc(short),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linked_with_a_template_plain_without() {
        let url = TraceUrl::parse("https://jaeger.example/trace/{trace_id}?uiFind={span_id}&x=1").unwrap();
        let id = "4bf92f3577b34da6a3ce929d0e0e4736";
        let linked = html(Some(&url), id, Some("00f067aa0ba902b7"));
        assert!(
            linked.contains(r#"href="https://jaeger.example/trace/4bf92f3577b34da6a3ce929d0e0e4736?uiFind=00f067aa0ba902b7&amp;x=1""#),
            "{linked}"
        );
        assert!(linked.contains("trace 4bf92f3577b34da6…"), "{linked}");
        assert_eq!(
            html(None, id, None),
            format!(r#"<code class="trace" title="trace {id}">{id}</code>"#)
        );
    }
}
