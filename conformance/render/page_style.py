"""The HTML report's style sheet: plain CSS inlined in the page (no fonts, no network)."""

STYLE = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em 2em; color: #1f2328;
       max-width: 1500px; }
h1 { font-size: 1.6em; margin: 0 0 0.4em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 1.1em; margin: 0.2em 0 0.4em; font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
header dl { display: grid; grid-template-columns: max-content auto; gap: 0.15em 1em; margin: 0.5em 0; }
header dt { font-weight: 600; color: #57606a; } header dd { margin: 0; overflow-wrap: anywhere; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { padding: 0.2em 0.7em; border-bottom: 1px solid #d8dee4; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.num, table.offenders td { text-align: right; font-variant-numeric: tabular-nums;
                              font-family: ui-monospace, "DejaVu Sans Mono", monospace; }
table.offenders td.f, table.offenders td.i { text-align: left; font-family: inherit; }
table.offenders td.b { color: #57606a; font-size: 0.9em; text-align: left; white-space: nowrap; }
caption { text-align: left; font-weight: 600; padding: 0.3em 0; }
.pass { color: #1a7f37; font-weight: 600; } .warn { color: #9a6700; font-weight: 600; }
.fail { color: #cf222e; font-weight: 700; }
.cat { --c: #888; border-left: 0.7em solid var(--c); padding-left: 0.3em; white-space: nowrap; }
.refused { color: #cf222e; font-weight: 600; } .allowed { color: #6e5400; }
section.row-panel { border: 1px solid #d0d7de; border-left: 5px solid #d0d7de; border-radius: 6px;
                    padding: 0.6em 1em; margin: 1em 0; }
section.fail-row { border-left-color: #cf222e; } section.warn-row { border-left-color: #d4a72c; }
ul.findings, ul.notes { margin: 0.3em 0; } ul.notes { color: #57606a; }
td.agree.same { background: #dafbe1; } td.agree.some { background: #fff8c5; } td.agree.many { background: #ffd8d3; }
.plots { display: flex; flex-wrap: wrap; gap: 1.2em; align-items: flex-start; }
figure { margin: 0; }
svg.plot { display: block; font-size: 11px; }
svg .title { font-size: 13px; font-weight: 600; fill: #1f2328; }
svg .tick { fill: #57606a; } svg .axis { fill: #1f2328; font-size: 12px; }
svg .area { fill: #f6f8fa; stroke: #d0d7de; } svg .frame { fill: none; stroke: #8c959f; }
svg .grid { stroke: #e1e4e8; stroke-width: 1; }
svg .line { fill: none; stroke-width: 1.6; } svg .dots { fill: none; }
svg .ring { fill: none; stroke: #1f2328; stroke-width: 1.4; }
svg image { image-rendering: pixelated; }
.legend { font-size: 12px; color: #57606a; max-width: 460px; }
.key { margin-right: 1em; white-space: nowrap; }
.key i { display: inline-block; width: 10px; height: 10px; margin-right: 0.3em; vertical-align: -1px; }
.key i.dot { background: var(--c); border-radius: 50%; }
.key i.line { height: 2px; vertical-align: 3px; width: 16px; background: var(--c); }
.key i.ring { border: 1.5px solid var(--c); border-radius: 50%; width: 8px; height: 8px; }
.left-out { color: #9a6700; }
"""
