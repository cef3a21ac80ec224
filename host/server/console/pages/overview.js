// Overview: the wallet, month-to-date spend and requests against the plan.

import { op } from '../api.js';
import { h, page, errorBox, loading, usd, nanos, stat } from '../ui.js';
import { scoped, can } from '../state.js';
import { entriesSince, startOfMonthMs, total } from '../usage-data.js';

export async function render(main) {
  const stats = h('div', { class: 'stats' }, loading());
  main.append(page('Overview', stats,
    can('billing.read') ? h('p', {}, h('a', { href: '#/billing' }, 'Plans, top-ups and payments')) : null));
  const cards = [];
  try {
    if (can('billing.read')) {
      const wallet = await op('wallet.get', scoped());
      cards.push(stat('Available balance', usd(nanos(wallet.available_usd)), 'balance'),
        stat('Held for requests in flight', usd(nanos(wallet.pending_usd)), 'pending'),
        stat('Plan', wallet.plan, 'plan'));
    }
    if (can('usage.read')) {
      const month = await entriesSince(startOfMonthMs());
      const chats = month.entries.filter((e) => e.kind === 'chat');
      cards.push(stat('Spend this month', usd(total(month.entries)) + (month.truncated ? ' (first 5000)' : ''), 'spend'),
        stat('Requests this month', String(chats.length), 'requests'));
      // The plan's monthly request limit, as the gateway counts it.
      const plan = await op('billing.usage.month', scoped());
      const count = (n) => n.toLocaleString('en');
      const left = plan.monthly_requests == null
        ? 'unlimited'
        : `${count(plan.remaining)} / ${count(plan.monthly_requests)}`;
      cards.push(stat(`Requests left on the ${plan.plan} plan`, left, 'plan-limit'));
    }
    stats.replaceChildren(...(cards.length ? cards : [h('p', {}, 'Your role cannot see balances or usage.')]));
  } catch (error) {
    stats.replaceChildren(errorBox(error));
  }
}
