"""HTML pieces shared by the run and sweep pages: escaping, tables, cards, the page frame.

Every text that comes from a report goes through escape(); nothing here loads anything from
outside the page (no script, no stylesheet link, no image file).
"""

import os

PAGE_STYLE = (
    "body{font:14px sans-serif;margin:20px;color:#222;background:#fafafa}h1{font-size:21px;"
    "margin:0 0 4px}h2{font-size:16px;margin:26px 0 8px}.sub{color:#555;margin:0 0 12px}"
    ".cards{display:flex;flex-wrap:wrap;gap:10px}.card{background:#fff;border:1px solid #ddd;"
    "border-radius:6px;padding:8px 14px;min-width:120px}.card span{display:block;color:#666;"
    "font-size:12px}.card b{font-size:19px}.grid{display:flex;flex-wrap:wrap;gap:10px}"
    "figure{margin:0;border:1px solid #ddd;background:#fff;padding:4px;max-width:640px}"
    "svg{display:block;max-width:100%;height:auto}.nodata{color:#777;margin:4px 0}"
    "table{border-collapse:collapse;margin:6px 0;background:#fff}td,th{border:1px solid #ccc;"
    "padding:3px 8px;text-align:right}th{background:#f0f0f0}td:first-child{text-align:left}"
    ".banner{background:#c62828;color:#fff;font-weight:bold;padding:10px 14px;border-radius:6px;"
    "margin:0 0 12px}")


def escape(s):
    """s as HTML text or attribute value: & < > " ' replaced by entities."""
    return (str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#39;"))


def table(head, rows):
    """A table with a header row; every cell escaped."""
    out = ["<table><tr>", "".join("<th>%s</th>" % escape(h) for h in head), "</tr>"]
    for row in rows:
        out.append("<tr>%s</tr>" % "".join("<td>%s</td>" % escape(c) for c in row))
    out.append("</table>")
    return "".join(out)


def card(label, value):
    return '<div class="card"><span>%s</span><b>%s</b></div>' % (escape(label), escape(value))


def figures(charts):
    """A grid of charts: an inline SVG per Chart, or a line saying a chart had no data.

    charts: [(chart_id, title, Chart | None | error text)]; chart_id prefixes the SVG's ids,
    so it must be unique within the page.
    """
    out = ['<div class="grid">']
    for chart_id, title, chart in charts:
        if chart is None:
            out.append('<p class="nodata">%s: no data</p>' % escape(title))
        elif isinstance(chart, str):
            out.append('<p class="nodata">%s: not drawn (%s)</p>' % (escape(title), escape(chart)))
        else:
            out.append("<figure>%s</figure>" % chart.inline(chart_id))
    out.append("</div>")
    return "".join(out)


def page(title, body):
    """The whole document around body (already HTML)."""
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>%s</title>'
            "<style>%s</style></head><body>%s</body></html>\n" % (escape(title), PAGE_STYLE, body))


def fallback_page(why):
    return page("Fulcrum report", "<p>The page could not be drawn (%s); the JSON has the "
                "figures.</p>" % escape(why))


def write_atomically(path, text):
    """Writes text to path.tmp, flushes it to disk and renames it onto path.

    A reader sees the old file or the new one, never half of one. Raises OSError; the
    temporary file is removed on failure.
    """
    tmp = str(path) + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
