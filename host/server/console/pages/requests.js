// The request log with filters, and one request's trace: attempts and
// fallbacks, tokens, cost and pricing snapshot, the requests it ran (a
// skill's or an actor's model calls), and an actor run's provenance trail.

import { op } from '../api.js';
import { h, page, table, errorBox, loading, usd, nanos, formatTime, field, replace } from '../ui.js';
import { scoped } from '../state.js';

export async function render(main, params) {
  const id = params.get('id');
  if (id) return trace(main, id);
  return list(main, params);
}

function dateMs(text, endOfDay) {
  if (!text) return undefined;
  const d = new Date(`${text}T00:00:00`);
  if (endOfDay) d.setDate(d.getDate() + 1);
  return d.getTime();
}

async function list(main, params) {
  const since = h('input', { type: 'date', name: 'since', value: params.get('since') || '' });
  const until = h('input', { type: 'date', name: 'until', value: params.get('until') || '' });
  const key = h('input', { type: 'text', name: 'key', value: params.get('key') || '', placeholder: 'key_…' });
  const model = h('input', { type: 'search', name: 'model', value: params.get('model') || '', placeholder: 'e.g. demo/small' });
  const outcome = h('select', { name: 'outcome' }, ['', 'success', 'error'].map((o) =>
    h('option', { value: o, selected: o === (params.get('outcome') || '') }, o || 'any outcome')));
  const form = h('form', {
    class: 'filters',
    onsubmit: (event) => {
      event.preventDefault();
      const q = new URLSearchParams();
      for (const [name, input] of [['since', since], ['until', until], ['key', key], ['model', model], ['outcome', outcome]]) {
        if (input.value) q.set(name, input.value);
      }
      location.hash = `#/requests?${q}`;
    },
  }, field('From', since), field('To', until), field('Key id', key), field('Model', model), field('Outcome', outcome),
  h('button', { type: 'submit' }, 'Filter'));
  const body = h('div', {}, loading());
  main.append(page('Requests', form, body));
  try {
    const result = await op('usage.list', scoped({
      since_ms: dateMs(params.get('since'), false),
      until_ms: dateMs(params.get('until'), true),
      key_id: params.get('key') || undefined,
      limit: 200,
      cursor: params.get('cursor') || undefined,
    }));
    const wantModel = (params.get('model') || '').toLowerCase();
    const wantOutcome = params.get('outcome') || '';
    const rows = result.entries.filter((e) =>
      (!wantModel || e.model.toLowerCase().includes(wantModel))
      && (!wantOutcome || (wantOutcome === 'success' ? e.outcome === 'success' : e.outcome !== 'success')));
    const next = new URLSearchParams(params);
    if (result.next_cursor) next.set('cursor', result.next_cursor);
    replace(body,
      table([
        { label: 'Request', value: (e) => h('a', { href: `#/requests?id=${encodeURIComponent(e.request_id)}` }, e.request_id) },
        { label: 'Time', value: (e) => formatTime(e.started_at_ms) },
        { label: 'Kind', value: (e) => e.kind },
        { label: 'Model', value: (e) => e.model },
        { label: 'Provider', value: (e) => e.provider || '' },
        { label: 'Outcome', value: (e) => h('span', { class: `badge ${e.outcome === 'success' ? 'ok' : 'bad'}` }, e.outcome) },
        { label: 'Tokens', value: (e) => `${e.input_tokens ?? '–'} / ${e.output_tokens ?? '–'}` },
        { label: 'Cost', value: (e) => usd(nanos(e.cost_usd)) },
        { label: 'Time taken', value: (e) => `${e.duration_ms} ms` },
      ], rows, { caption: 'Requests', empty: 'No requests match.' }),
      result.next_cursor ? h('p', {}, h('a', { href: `#/requests?${next}`, class: 'button secondary' }, 'Older requests')) : null);
  } catch (error) {
    body.replaceChildren(errorBox(error));
  }
}

function dl(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter(([, v]) => v !== undefined && v !== null && v !== '')
    .flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

async function trace(main, id) {
  const body = h('div', {}, loading());
  main.append(page(`Request ${id}`, h('p', {}, h('a', { href: '#/requests' }, '← All requests')), body));
  try {
    const row = await op('requests.get', scoped({ request_id: id }));
    const attempts = Array.isArray(row.attempts) ? row.attempts : [];
    const children = await op('usage.list', scoped({ since_ms: row.started_at_ms, limit: 500 }))
      .then((p) => p.entries.filter((e) => e.parent_request_id === id)).catch(() => []);
    const parts = [
      h('h2', {}, 'Summary'),
      dl([
        ['Kind', row.kind], ['Model', row.model], ['Provider', row.provider], ['Upstream model', row.upstream_model],
        ['Outcome', row.outcome], ['Status', row.status], ['Streamed', row.streamed ? 'yes' : 'no'],
        ['Started', formatTime(row.started_at_ms)], ['Duration', `${row.duration_ms} ms`], ['Key', row.key_id],
        ['Cost (billed)', usd(nanos(row.cost_usd))], ['Held before the call', usd(nanos(row.reserved_usd))],
        ['Pricing snapshot', row.pricing_snapshot_id], ['Tokens in / out', `${row.tokens?.input ?? '–'} / ${row.tokens?.output ?? '–'}`],
        ['Token source', row.tokens?.source], ['Ran inside', row.parent_request_id
          ? h('a', { href: `#/requests?id=${encodeURIComponent(row.parent_request_id)}` }, row.parent_request_id) : null],
      ]),
      h('h2', {}, `Attempts (${attempts.length})`),
      h('p', { class: 'hint' }, attempts.length > 1 ? 'Each attempt after the first is a fallback.' : 'Answered by the first attempt.'),
      table(Object.keys(attempts[0] || {}).map((k) => ({ label: k, value: (a) => display(a[k]) })), attempts,
        { caption: 'Attempts', empty: 'No upstream attempts.' }),
    ];
    if (children.length) {
      parts.push(h('h2', {}, 'Requests it ran'), table([
        { label: 'Request', value: (e) => h('a', { href: `#/requests?id=${encodeURIComponent(e.request_id)}` }, e.request_id) },
        { label: 'Kind', value: (e) => e.kind }, { label: 'Model', value: (e) => e.model },
        { label: 'Cost', value: (e) => usd(nanos(e.cost_usd)) },
      ], children));
    }
    if (row.provenance) {
      parts.push(h('h2', {}, 'Actor run (signed provenance trail)'), runTree(row.provenance));
    }
    parts.push(h('details', {}, h('summary', {}, 'Raw trace (JSON)'), h('pre', {}, JSON.stringify(row, null, 2))));
    body.replaceChildren(...parts);
  } catch (error) {
    body.replaceChildren(errorBox(error));
  }
}

function display(value) {
  if (value === null || value === undefined) return '';
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

/** The run's steps as a nested list, from whatever tree shape the trail has. */
function runTree(provenance) {
  const trail = provenance.trail || provenance;
  const node = (value, label) => {
    if (Array.isArray(value)) return h('ul', {}, value.map((v, i) => h('li', {}, node(v, `${label}[${i}]`))));
    if (value && typeof value === 'object') {
      const title = value.step || value.kind || value.id || value.name || label;
      return h('details', { open: true }, h('summary', {}, String(title)),
        h('ul', {}, Object.entries(value).map(([k, v]) => h('li', {},
          typeof v === 'object' && v !== null ? node(v, k) : `${k}: ${v}`))));
    }
    return String(value);
  };
  return h('div', { class: 'run-tree' }, node(trail, 'run'));
}
