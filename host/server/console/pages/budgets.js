// Budgets (spend controls): the workspace's budget and each key's, with
// what this period has spent, holds and has left. Owners and admins set,
// replace and remove them; the gateway enforces them before any request
// reaches a provider, so this page only shows and edits them.

import { op } from '../api.js';
import { h, page, table, errorBox, loading, field, usd, nanos, toast, confirmAction } from '../ui.js';
import { scoped, can } from '../state.js';

export async function render(main) {
  const status = h('div', { 'aria-live': 'polite' });
  const box = h('div', {}, loading());
  main.append(page('Budgets',
    h('p', { class: 'hint' }, 'A request whose worst case does not fit what is left of a budget is refused ',
      '(402 budget_exceeded) before it reaches a provider. Periods are UTC calendar days or months.'),
    status, box));
  await refresh(box, status);
}

async function refresh(box, status) {
  try {
    const [limits, keys] = await Promise.all([
      op('billing.limits.get', scoped()),
      op('keys.list', scoped()).then((k) => k.keys).catch(() => []),
    ]);
    draw(box, status, limits, keys);
  } catch (error) {
    box.replaceChildren(errorBox(error));
  }
}

const money = (text) => usd(nanos(text));

function draw(box, status, limits, keys) {
  const writable = can('budget.write');
  const names = new Map(keys.map((k) => [k.key_id, k.name || k.hint || k.key_id]));
  const label = (b) => (b.scope === 'workspace' ? 'Workspace' : `Key ${names.get(b.key_id) || b.key_id}`);
  const budgets = [limits.workspace, ...limits.keys].filter(Boolean);
  const after = (next) => draw(box, status, next, keys);
  box.replaceChildren(
    table([
      { label: 'Budget', value: label },
      { label: 'Period', value: (b) => `${b.period}, until ${new Date(b.period_end).toLocaleString()}` },
      { label: 'Limit', value: (b) => money(b.limit_usd) },
      { label: 'Per request', value: (b) => (b.max_request_usd ? money(b.max_request_usd) : 'no cap') },
      { label: 'Spent', value: (b) => money(b.spent_usd) },
      { label: 'Held', value: (b) => money(b.held_usd) },
      { label: 'Remaining', value: (b) => remaining(b) },
      { label: 'Alerts at', value: (b) => (b.alert_thresholds.length ? b.alert_thresholds.map((t) => `${t}%`).join(', ') : 'none') },
      {
        label: 'Actions',
        value: (b) => (writable ? h('button', {
          type: 'button',
          class: 'danger',
          'aria-label': `Remove the budget of ${label(b)}`,
          onclick: async () => {
            if (!confirmAction(`Remove the budget of ${label(b)}? Its spend this period is forgotten.`)) return;
            try {
              after(await op('billing.limits.set', scoped({ scope: b.scope, key_id: b.key_id, remove: true })));
              toast('Budget removed');
            } catch (error) { toast(error.message, 'error'); }
          },
        }, 'Remove') : ''),
      },
    ], budgets, { caption: 'Budgets', empty: 'No budgets set.' }),
    editor(writable, limits, keys, budgets, status, after));
}

/** What is left, with a meter of how much of the limit is spent or held. */
function remaining(b) {
  const limit = Number(nanos(b.limit_usd));
  const used = Number(nanos(b.spent_usd) + nanos(b.held_usd));
  return h('span', { class: 'remaining' },
    h('span', { 'data-testid': 'budget-remaining' }, money(b.remaining_usd)),
    h('meter', { min: 0, max: limit || 1, value: Math.min(used, limit), 'aria-label': 'Share of the limit used' }));
}

function editor(writable, limits, keys, budgets, status, after) {
  if (!writable) return h('p', { class: 'hint', 'data-testid': 'readonly' }, 'Only owners and admins set budgets.');
  if (!limits.spend_controls) {
    return h('p', { class: 'hint', 'data-testid': 'no-spend-controls' },
      `The ${limits.plan} plan has no spend controls. Budgets already set stay enforced and can be removed; `,
      'to set one, move to a plan with budgets on the ', h('a', { href: '#/billing' }, 'Billing'), ' page.');
  }
  const scope = h('select', { name: 'scope' },
    h('option', { value: 'workspace' }, 'the workspace'),
    keys.filter((k) => !k.revoked_at).map((k) => h('option', { value: `key:${k.key_id}` }, `key ${k.name || k.hint}`)));
  const period = h('select', { name: 'period' }, h('option', { value: 'monthly' }, 'monthly'), h('option', { value: 'daily' }, 'daily'));
  const limit = h('input', { type: 'text', name: 'limit', inputmode: 'decimal', required: true, placeholder: '500' });
  const perRequest = h('input', { type: 'text', name: 'max-request', inputmode: 'decimal', placeholder: 'no cap' });
  const alerts = h('input', { type: 'text', name: 'alerts', value: '50, 80, 100' });
  // Picking a budget that exists fills the form with it, to replace it.
  const fill = () => {
    const [kind, keyId] = scope.value.split(':');
    const b = budgets.find((x) => x.scope === kind && (kind === 'workspace' || x.key_id === keyId));
    period.value = b ? b.period : 'monthly';
    limit.value = b ? b.limit_usd : '';
    perRequest.value = b && b.max_request_usd ? b.max_request_usd : '';
    alerts.value = b ? b.alert_thresholds.join(', ') : '50, 80, 100';
  };
  scope.addEventListener('change', fill);
  fill();
  return h('form', {
    class: 'card',
    'data-testid': 'set-budget',
    onsubmit: async (event) => {
      event.preventDefault();
      status.replaceChildren();
      const thresholds = alerts.value.split(/[\s,]+/).filter(Boolean).map(Number);
      if (thresholds.some((t) => !Number.isInteger(t))) {
        status.replaceChildren(errorBox(new Error('Alert thresholds are whole percents, e.g. 50, 80, 100.')));
        return;
      }
      const [kind, keyId] = scope.value.split(':');
      try {
        after(await op('billing.limits.set', scoped({
          scope: kind,
          key_id: keyId,
          period: period.value,
          limit_usd: limit.value.trim(),
          max_request_usd: perRequest.value.trim() || undefined,
          alert_thresholds: thresholds,
        })));
        toast('Budget saved');
      } catch (error) {
        status.replaceChildren(errorBox(error));
      }
    },
  }, h('h2', {}, 'Set a budget'), field('For', scope), field('Period', period),
  field('Limit (USD)', limit, 'Billed cost per period: provider cost plus the gateway fee.'),
  field('Most one request may cost (USD)', perRequest, 'Optional: a cap on one request\'s worst case.'),
  field('Alert at (% of the limit)', alerts, 'Comma-separated; empty for no alerts.'),
  h('button', { type: 'submit' }, 'Save budget'));
}
