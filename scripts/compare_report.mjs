// attnkit: what the cross-target comparison (scripts/compare.mjs) reports beyond its per-case lines: each target's
// speed against the first target as one geometric mean, and the HTML report, one row per case and one column per
// target, with the cases where a target diverges or fails listed first and a switch to show only those.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

export const fmt = (x) => (x === null || x === undefined ? '-' : Number.isFinite(x) ? x.toExponential(2) : String(x));
export const fmtMs = (x) =>
  (typeof x === 'number' ? (x < 1 ? x.toFixed(3) : x < 100 ? x.toFixed(2) : x.toFixed(0)) : '-');

// Each target's time over the first target's (the baseline: attnkit native unless --targets leaves it out), as the
// geometric mean of the per-case ratios over the cases both ran: { label: { ratio, cases } }, ratio null when no
// case was timed on both. Per-case ratios, not total times, so that the largest cases do not decide it alone.
export function speedAgainstFirst(entries, targets) {
  const out = {};
  targets.forEach((t, i) => {
    let logSum = 0;
    let cases = 0;
    for (const { rows } of entries) {
      const base = rows[0].timeMs, mine = rows[i].timeMs;
      if (base > 0 && mine > 0) {
        logSum += Math.log(mine / base);
        cases++;
      }
    }
    out[t.label] = { ratio: cases ? Math.exp(logSum / cases) : null, cases };
  });
  return out;
}

export const isBad = (row) => row.status === 'DIVERGES' || row.status === 'error';

const ENTITIES = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };
const esc = (s) => String(s).replace(/[&<>"]/g, (ch) => ENTITIES[ch]);

// A status's detail can run to several hundred characters (a skip's reason, an ORT error): a grid cell shows the
// first of it and the whole is its tooltip; the list of divergences shows it all.
function detailHtml(detail, limit = 140) {
  if (!detail) return '';
  const short = detail.length > limit ? `${detail.slice(0, limit)}…` : detail;
  return `<br><small title="${esc(detail)}">${esc(short)}</small>`;
}

function cellHtml(r) {
  const cls = r.status === 'ok' ? 'ok' : isBad(r) ? 'bad' : 'note';
  const lines = [];
  if (r.status !== 'ok') lines.push(`<b>${esc(r.status)}</b>`);
  if (r.maxAbs !== null || r.maxRel !== null) lines.push(`<code>${fmt(r.maxAbs)} / ${fmt(r.maxRel)}</code>`);
  if (r.timeMs !== null) lines.push(`<code>${fmtMs(r.timeMs)} ms</code>`);
  return `<td class="${cls}">${lines.join('<br>')}${detailHtml(r.detail)}</td>`;
}

function summaryHtml(targets, totals, speed) {
  const statuses = ['ok', 'DIVERGES', 'error', 'skip', 'unchecked'];
  const head = `<tr><th>target</th>${statuses.map((s) => `<th>${s}</th>`).join('')}<th>time / ${
    esc(targets[0].label)}</th></tr>`;
  const rows = targets.map((t) => {
    const s = totals[t.label], sp = speed[t.label];
    const counts = statuses.map((k) => `<td class="${s[k] && k !== 'ok' ? (k === 'skip' ? 'note' : 'bad') : ''}">${
      s[k] ?? 0}</td>`).join('');
    const note = t.timeNote ? `<br><small>${esc(t.timeNote)}</small>` : '';
    const ratio = (sp.ratio === null ? '-' : `${sp.ratio.toFixed(2)}x <small>(${sp.cases} cases)</small>`) + note;
    return `<tr><td>${esc(t.label)}</td>${counts}<td>${ratio}</td></tr>`;
  }).join('\n');
  return `<table class="summary">${head}\n${rows}</table>`;
}

function divergencesHtml(entries, targets) {
  const items = entries.flatMap(({ c, rows }, k) => rows.map((r, i) => ({ r, i })).filter(({ r }) => isBad(r))
    .map(({ r, i }) => `<li><a href="#case-${k}">${esc(c.name)}</a> on ${esc(targets[i].label)}: <b>${
      esc(r.status)}</b>${detailHtml(r.detail, Infinity)}</li>`));
  return items.length
    ? `<h2>Where a target diverges or fails (${items.length})</h2><ul>${items.join('\n')}</ul>`
    : '<h2>No target diverges or fails</h2>';
}

// entries: [{ c, rows (one per target, in targets' order), referenceNote }]; totals: { label: { status: count } };
// meta: { repeat, threads, date }.
export function writeHtml(out, entries, targets, totals, meta) {
  const speed = speedAgainstFirst(entries, targets);
  const head = `<tr><th>case</th><th>shape</th>${targets.map((t) => `<th>${esc(t.label)}</th>`).join('')}</tr>`;
  const body = entries.map(({ c, rows, referenceNote, shape }, k) => {
    const quiet = !rows.some(isBad);  // skips are targets' known limits, listed in their cells
    return `<tr id="case-${k}"${quiet ? ' class="quiet"' : ''}><td>${esc(c.name)}${
      referenceNote ? `<br><small>${esc(referenceNote)}</small>` : ''}</td><td>${esc(shape)}</td>${
      rows.map(cellHtml).join('')}</tr>`;
  }).join('\n');
  const html = `<!doctype html>
<html><head><meta charset="utf-8"><title>attnkit cross-target comparison</title>
<style>body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:1.5em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}td.bad{background:#fdd}
td.note{background:#ffd}small{color:#555}code{font-size:13px;white-space:nowrap}body.problems tr.quiet{display:none}
th{position:sticky;top:0;background:#f4f4f4}</style></head>
<body><h1>attnkit cross-target comparison</h1>
<p>${entries.length} cases, ${meta.threads} thread(s), ${esc(meta.date)}. Each cell gives the target's max abs / max rel
difference from the fp64 reference (<code>attnkit run --reference</code>) and its median time over ${meta.repeat}
run${meta.repeat === 1 ? '' : 's'}
(attnkit native: <code>attnkit bench</code>; ORT native: its own run, from its profiler; the wasm targets: the call
from JS, copies in and out included). Red cells diverge beyond the case's tolerance or failed; yellow ones were
skipped (the target cannot run the case, and says why). The last column of the summary is each target's time over
${esc(targets[0].label)}'s, the geometric mean of the ratios over the cases both ran. The cases test semantics and
are mostly small, so their times are mostly each target's cost per call; <code>npm run bench</code> times model
shapes.</p>
${summaryHtml(targets, totals, speed)}
${divergencesHtml(entries, targets)}
<h2>Every case</h2>
<p><label><input type="checkbox" onchange="document.body.classList.toggle('problems', this.checked)">
only the cases where some target diverges or fails</label></p>
<table>${head}
${body}</table></body></html>
`;
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, html);
}
