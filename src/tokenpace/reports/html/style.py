"""The page's stylesheet, inline: system fonts only, nothing to fetch."""

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1120px;
 padding:16px 24px;color:#222;background:#fff}
h1{font-size:1.4em;margin:.2em 0}h2{font-size:1.15em;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:1.6em}
h3{margin:.1em 0 .3em;font-size:1em}
.headline{color:#444}.small{font-size:.85em;color:#555;margin:.2em 0}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(250px,1fr));gap:12px;margin:8px 0}
.card{border:1px solid #ddd;border-radius:8px;padding:10px 12px;background:#fafafa}
.card table{border-collapse:collapse;width:100%}.card th{text-align:left;font-weight:600;padding:1px 4px}
.card td{padding:1px 4px}.card ul{margin:0;padding-left:18px}
.badge{border-radius:4px;padding:0 5px;font-size:.8em;color:#fff}
.badge.excellent{background:#27ae60}.badge.acceptable{background:#d4a017}.badge.poor{background:#c0392b}
.slo{font-size:.9em}.slo.ok{color:#1e8449}.slo.bad{color:#c0392b}
.banner{border:2px solid #c0392b;background:#fdecea;padding:8px 12px;border-radius:6px;margin:8px 0}
.note{background:#fff8e1;border-left:4px solid #d4a017;padding:6px 10px;margin:6px 0}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(500px,1fr));gap:8px}
figure.plot{margin:4px 0}figure.plot svg{width:100%;height:auto}
figcaption{font-size:.85em;color:#555}
table{border-collapse:collapse;font-size:.9em}th,td{border-bottom:1px solid #eee;padding:3px 8px;text-align:left}
table.narrow{min-width:380px}
pre{background:#f5f5f5;padding:10px;overflow:auto;font-size:.8em;max-height:480px}
"""
