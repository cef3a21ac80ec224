// The audit log (`audit.list`, owners and admins): every change made to the
// workspace, by whom, from where and with what outcome, newest first,
// filtered by op, actor and time, page by page. A row opens to the op's
// params and the target's state before and after.

import { op } from '../api.js';
import { h, page, table, errorBox, loading, field, formatTime, replace } from '../ui.js';
import { scoped, can } from '../state.js';

const FILTERS = ['op', 'actor', 'since', 'until'];

function dateMs(text, endOfDay) {
  if (!text) return undefined;
  const d = new Date(`${text}T00:00:00`);
  if (endOfDay) d.setDate(d.getDate() + 1);
  return d.getTime();
}

export async function render(main, params) {
  if (!can('audit.read')) {
    main.append(page('Audit log', h('p', { class: 'hint', 'data-testid': 'readonly' },
      'Only owners and admins may read the audit log.')));
    return;
  }
  const inputs = {
    op: h('input', { type: 'search', name: 'op', placeholder: 'e.g. keys.create' }),
    actor: h('input', { type: 'search', name: 'actor', placeholder: 'usr_… or key_…' }),
    since: h('input', { type: 'date', name: 'since' }),
    until: h('input', { type: 'date', name: 'until' }),
  };
  for (const name of FILTERS) inputs[name].value = params.get(name) || '';
  const form = h('form', {
    class: 'filters',
    role: 'search',
    onsubmit: (event) => {
      event.preventDefault();
      const q = new URLSearchParams();
      for (const name of FILTERS) if (inputs[name].value.trim()) q.set(name, inputs[name].value.trim());
      location.hash = `#/audit?${q}`;
    },
  }, field('Op', inputs.op), field('Actor', inputs.actor), field('From', inputs.since), field('To', inputs.until),
  h('button', { type: 'submit' }, 'Filter'));
  const body = h('div', {}, loading());
  main.append(page('Audit log', form, body));
  try {
    const [result, names] = await Promise.all([op('audit.list', scoped({
      op: params.get('op') || undefined,
      actor: params.get('actor') || undefined,
      since_ms: dateMs(params.get('since'), false),
      until_ms: dateMs(params.get('until'), true),
      limit: 100,
      cursor: params.get('cursor') || undefined,
    })), actorNames()]);
    const next = new URLSearchParams(params);
    if (result.next_cursor) next.set('cursor', result.next_cursor);
    replace(body,
      table([
        { label: 'Time', value: (e) => formatTime(e.at_ms) },
        { label: 'Op', value: (e) => h('code', {}, e.op) },
        { label: 'Actor', value: (e) => actor(e, names) },
        { label: 'Target', value: (e) => h('span', { class: 'audit-target' }, summary(e.target)) },
        {
          label: 'Outcome',
          value: (e) => h('span', { class: `badge ${e.outcome === 'ok' ? 'ok' : 'bad'}`, title: e.error ? e.error.message : undefined },
            e.outcome === 'ok' ? 'ok' : `error${e.error && e.error.reason ? `: ${e.error.reason}` : ''}`),
        },
        { label: 'Details', value: details },
      ], result.entries, { caption: 'Audit log', empty: 'No entries match.', rowAttrs: (e) => ({ 'data-op': e.op }) }),
      result.next_cursor ? h('p', {}, h('a', { href: `#/audit?${next}`, class: 'button secondary' }, 'Older entries')) : null);
  } catch (error) {
    body.replaceChildren(errorBox(error));
  }
}

/** Members' e-mails and keys' names by id, so actors read as people. */
async function actorNames() {
  const names = new Map();
  const [members, keys] = await Promise.all([
    op('members.list', scoped()).then((r) => r.members).catch(() => []),
    op('keys.list', scoped()).then((r) => r.keys).catch(() => []),
  ]);
  for (const m of members) names.set(m.user_id, m.email);
  for (const k of keys) names.set(k.key_id, `key ${k.name || k.hint}`);
  return names;
}

function actor(e, names) {
  const a = e.actor || {};
  const id = a.user_id || a.key_id || a.session_id || '';
  const name = names.get(a.user_id) || names.get(a.key_id);
  const who = name || (id ? h('code', {}, id) : null);
  // The payment processor and anonymous callers have only a kind.
  if (!who) return a.kind || 'unknown';
  return h('span', { class: 'audit-actor' }, who, h('small', {}, ` ${a.kind || ''}`));
}

/**
 * A target's identifying fields on one line: `{key_id: …}` → "key_id key_…".
 * The workspace is the page's own, so it is left out.
 */
function summary(target) {
  if (!target || typeof target !== 'object') return '';
  return Object.entries(target).filter(([k, v]) => k !== 'workspace_id' && v !== null && typeof v !== 'object')
    .map(([k, v]) => `${k} ${v}`).join(', ');
}

function details(e) {
  const part = (title, value) => (value === null || value === undefined ? null
    : [h('h3', {}, title), h('pre', {}, JSON.stringify(value, null, 2))]);
  return h('details', { class: 'audit-details' }, h('summary', {}, 'Show'),
    part('Params', e.params), part('Before', e.before), part('After', e.after), part('Error', e.error),
    h('p', { class: 'hint' }, `#${e.seq}`, e.ip ? ` · from ${e.ip}` : '', ' · hash ', h('code', { class: 'digest' }, e.hash)));
}
