// Charts as SVG, drawn here (no library): vertical bars over days and
// horizontal bars by category. Values are numbers for drawing only; labels
// show the exact figures the caller formats.

import { svg, h } from './ui.js';

/**
 * Vertical bars. points: [{label, value, text}], value ≥ 0.
 */
export function barChart(title, points, { height = 180 } = {}) {
  const width = Math.max(320, points.length * 28);
  const pad = { top: 12, right: 8, bottom: 4, left: 8 };
  const max = Math.max(...points.map((p) => p.value), 0) || 1;
  const inner = height - pad.top - pad.bottom;
  const step = (width - pad.left - pad.right) / Math.max(points.length, 1);
  const bars = points.map((p, i) => {
    const barHeight = (p.value / max) * inner;
    const x = pad.left + i * step + step * 0.15;
    const y = pad.top + inner - barHeight;
    return svg('rect', { x, y, width: step * 0.7, height: Math.max(barHeight, p.value > 0 ? 1 : 0), class: 'bar', rx: 2 },
      svg('title', {}, `${p.label}: ${p.text}`));
  });
  // The axis is HTML under the drawing, so it stays readable at any width.
  const ticks = points.length ? [points[0], points[Math.floor(points.length / 2)], points[points.length - 1]] : [];
  const peak = points.reduce((best, p) => (p.value > best.value ? p : best), { value: -1, text: '' });
  const chart = svg('svg', {
    viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-label': title, class: 'chart', preserveAspectRatio: 'none',
  }, svg('line', { x1: pad.left, x2: width - pad.right, y1: pad.top + inner, y2: pad.top + inner, class: 'baseline' }), bars);
  return h('figure', { class: 'chart-figure' }, h('figcaption', {}, title,
    peak.value > 0 ? h('span', { class: 'peak' }, ` · peak ${peak.text} (${peak.label})`) : null),
  chart, h('div', { class: 'axis-labels', 'aria-hidden': 'true' }, ticks.map((t) => h('span', {}, t.label))),
  dataTable(title, points));
}

/** Horizontal bars for categories: [{label, value, text}]. */
export function rankChart(title, rows) {
  const max = Math.max(...rows.map((r) => r.value), 0) || 1;
  return h('figure', { class: 'chart-figure' }, h('figcaption', {}, title),
    rows.length ? h('ul', { class: 'rank' }, rows.map((r) => h('li', {},
      h('span', { class: 'rank-label' }, r.label),
      h('span', { class: 'rank-bar', role: 'presentation' }, fill(r.value / max)),
      h('span', { class: 'rank-value' }, r.text)))) : h('p', { class: 'empty' }, 'No data.'));
}

// Set through the CSSOM: the page's CSP allows no inline style attributes.
function fill(fraction) {
  const bar = h('span', { class: 'rank-fill' });
  bar.style.width = `${Math.max(1, fraction * 100).toFixed(1)}%`;
  return bar;
}

// The same figures as a table for screen readers.
function dataTable(title, points) {
  return h('table', { class: 'visually-hidden' }, h('caption', {}, title),
    h('tbody', {}, points.map((p) => h('tr', {}, h('th', { scope: 'row' }, p.label), h('td', {}, p.text)))));
}
