// Usage charts: cost and requests per day, by model and by provider.

import { h, page, errorBox, loading, usd, field } from '../ui.js';
import { barChart, rankChart } from '../chart.js';
import { entriesSince, group, dayKey, total } from '../usage-data.js';

export async function render(main, params) {
  const days = Number(params.get('days')) || 30;
  const select = h('select', {
    onchange: (event) => { location.hash = `#/usage?days=${event.target.value}`; },
  }, [7, 30, 90].map((d) => h('option', { value: d, selected: d === days }, `Last ${d} days`)));
  const body = h('div', {}, loading());
  main.append(page('Usage', field('Period', select), body));
  try {
    const start = new Date();
    start.setHours(0, 0, 0, 0);
    start.setDate(start.getDate() - (days - 1));
    const { entries, truncated } = await entriesSince(start.getTime());
    const byDay = group(entries, (e) => dayKey(e.started_at_ms));
    const points = [];
    for (let i = 0; i < days; i++) {
      const d = new Date(start);
      d.setDate(start.getDate() + i);
      const key = dayKey(d.getTime());
      const g = byDay.get(key) || { cost: 0n, requests: 0 };
      points.push({ day: key.slice(5), cost: g.cost, requests: g.requests });
    }
    const ranked = (by) => [...group(entries, by).entries()]
      .sort((a, b) => (b[1].cost > a[1].cost ? 1 : b[1].cost < a[1].cost ? -1 : b[1].requests - a[1].requests))
      .map(([label, g]) => ({ label: label || '(none)', value: Number(g.cost), text: `${usd(g.cost)} · ${g.requests} req` }));
    body.replaceChildren(
      h('p', {}, `${entries.length} requests, ${usd(total(entries))} in all`, truncated ? ' (the first 5000 shown).' : '.'),
      h('div', { class: 'charts' },
        barChart('Cost per day (USD)', points.map((p) => ({ label: p.day, value: Number(p.cost), text: usd(p.cost) }))),
        barChart('Requests per day', points.map((p) => ({ label: p.day, value: p.requests, text: String(p.requests) }))),
        rankChart('Cost by model', ranked((e) => e.model)),
        rankChart('Cost by provider', ranked((e) => e.provider))));
  } catch (error) {
    body.replaceChildren(errorBox(error));
  }
}
