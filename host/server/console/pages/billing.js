// Billing: the wallet, the workspace's plan and the plans it may move to,
// top-ups, and the checkouts so far. Paying happens on the payment
// processor's hosted page (Stripe Checkout): the console only sends the
// browser there, and the gateway credits the wallet or changes the plan
// when the processor's signed webhook says the payment went through.

import { op } from '../api.js';
import { h, page, table, errorBox, loading, field, stat, usd, nanos, formatTime, toast, confirmAction } from '../ui.js';
import { scoped, can } from '../state.js';

export async function render(main, params) {
  const wallet = h('div', { class: 'stats' }, loading());
  const plans = h('div', {}, loading());
  const history = h('div', {}, loading());
  const status = h('div', { 'aria-live': 'polite' });
  const refresh = async () => {
    // The plans price the subscriptions in the history, so they come first.
    const { plans: all } = await op('billing.plans.list').catch(() => ({ plans: [] }));
    await Promise.all([showWallet(wallet), showPlans(plans, status, all), showHistory(history, all)]);
  };
  main.append(page('Billing',
    returned(params.get('checkout'), refresh),
    h('h2', {}, 'Wallet'), wallet,
    can('payment.write') ? topupForm(status) : null,
    status,
    h('h2', {}, 'Plans'), plans,
    h('h2', {}, 'Top-ups and plan payments'), history,
    h('p', {}, h('a', { href: '#/budgets' }, 'Budgets (spend controls)'))));
  await refresh();
}

/** What the processor's page sent the browser back to say. */
function returned(outcome, refresh) {
  if (outcome === 'done') {
    return h('div', { class: 'notice ok', role: 'status', 'data-testid': 'checkout-done' },
      h('p', {}, 'Payment complete. The wallet or plan changes as soon as the payment processor confirms it, usually within seconds.'),
      h('button', { type: 'button', class: 'secondary', onclick: refresh }, 'Refresh'));
  }
  if (outcome === 'cancelled') {
    return h('div', { class: 'notice', role: 'status' }, h('p', {}, 'Checkout cancelled: nothing was charged.'));
  }
  return null;
}

async function showWallet(box) {
  try {
    const wallet = await op('wallet.get', scoped());
    box.replaceChildren(
      stat('Available balance', usd(nanos(wallet.available_usd)), 'balance'),
      stat('Held for requests in flight', usd(nanos(wallet.pending_usd)), 'pending'),
      stat('Plan', wallet.plan, 'plan'));
  } catch (error) {
    box.replaceChildren(errorBox(error));
  }
}

function topupForm(status) {
  const amount = h('input', {
    type: 'number', name: 'amount', min: '0.01', step: '0.01', required: true, placeholder: '25', inputmode: 'decimal',
  });
  const submit = h('button', { type: 'submit' }, 'Top up');
  return h('form', {
    class: 'card',
    'data-testid': 'topup',
    onsubmit: async (event) => {
      event.preventDefault();
      status.replaceChildren();
      submit.disabled = true;
      try {
        const topup = await op('billing.topups.create', scoped({ amount_usd: amount.value.trim() }));
        // The processor's page takes the payment and sends the browser back.
        location.assign(topup.checkout_url);
      } catch (error) {
        status.replaceChildren(errorBox(error));
        submit.disabled = false;
      }
    },
  }, h('h2', {}, 'Top up the wallet'),
  field('Amount (USD)', amount, 'Paid on the payment processor\'s page; the wallet is credited once it confirms.'),
  submit);
}

const count = (n) => (n === null || n === undefined ? 'unlimited' : n.toLocaleString('en'));

async function showPlans(box, status, plans) {
  try {
    const current = await op('billing.plan.get', scoped());
    const mine = current.plan.id;
    const cheapestFirst = [...plans].sort((a, b) => {
      const diff = nanos(a.monthly_price_usd) - nanos(b.monthly_price_usd);
      return diff < 0n ? -1 : diff > 0n ? 1 : a.id.localeCompare(b.id);
    });
    const writable = can('billing.write');
    box.replaceChildren(
      h('p', {}, 'This workspace is on the ', h('strong', { 'data-testid': 'current-plan' }, mine), ' plan.',
        writable ? '' : ' Only owners change the plan.'),
      table([
        { label: 'Plan', value: (p) => p.id },
        { label: 'Price / month', value: (p) => usd(nanos(p.monthly_price_usd)) },
        { label: 'Requests / month', value: (p) => count(p.monthly_requests) },
        { label: 'Actor endpoints', value: (p) => count(p.endpoints) },
        { label: 'Seats', value: (p) => count(p.seats) },
        { label: 'Fee / request', value: (p) => usd(nanos(p.request_fee_usd)) },
        { label: 'Budgets', value: (p) => (p.spend_controls ? 'yes' : 'no') },
        {
          label: 'Actions',
          value: (p) => {
            if (p.id === mine) return h('span', { class: 'badge ok' }, 'current');
            if (!writable) return '';
            return h('button', {
              type: 'button',
              class: 'secondary',
              'aria-label': `Change plan to ${p.id}`,
              onclick: () => change(p, box, status, plans),
            }, 'Change plan');
          },
        },
      ], cheapestFirst, { caption: 'Plans' }));
  } catch (error) {
    box.replaceChildren(errorBox(error));
  }
}

async function change(plan, box, status, plans) {
  const priced = nanos(plan.monthly_price_usd) > 0n;
  const question = priced
    ? `Move to ${plan.id} for ${usd(nanos(plan.monthly_price_usd))} a month? You pay on the payment processor's page; the plan applies once it is paid.`
    : `Move to ${plan.id} now?`;
  if (!confirmAction(question)) return;
  status.replaceChildren();
  try {
    const result = await op('billing.plan.change', scoped({ plan: plan.id }));
    if (result.checkout && result.checkout.checkout_url) {
      location.assign(result.checkout.checkout_url);
      return;
    }
    toast(`This workspace is now on ${result.plan.id}`);
    await showPlans(box, status, plans);
  } catch (error) {
    status.replaceChildren(errorBox(error));
  }
}

/** A checkout's state in words; refunds are counted on paid ones. */
function state(c) {
  const refunded = nanos(c.refunded_usd);
  if (c.state === 'paid' && refunded > 0n) {
    const all = refunded >= nanos(c.amount_usd);
    return h('span', { class: 'badge bad' }, all ? 'refunded' : `partly refunded (${usd(refunded)})`);
  }
  const good = c.state === 'paid';
  const bad = ['failed', 'expired'].includes(c.state);
  return h('span', { class: `badge ${good ? 'ok' : bad ? 'bad' : ''}` }, c.state);
}

async function showHistory(box, plans) {
  // A subscription's checkout records no amount of its own: its plan's price is what it pays monthly.
  const price = new Map(plans.map((p) => [p.id, p.monthly_price_usd]));
  const amount = (c) => (c.kind === 'subscription' && nanos(c.amount_usd) === 0n && price.has(c.plan)
    ? `${usd(nanos(price.get(c.plan)))} / month` : usd(nanos(c.amount_usd)));
  try {
    const { checkouts, topup_hold: hold } = await op('billing.topups.list', scoped({ limit: 50 }));
    // A disputed payment holds further top-ups until an operator looks.
    const disputed = hold ? h('p', { class: 'notice bad', 'data-testid': 'topup-hold' },
      `Top-ups are held: ${hold}. An operator lifts the hold (tollgate admin payments release).`) : null;
    box.replaceChildren(...(disputed ? [disputed] : []), table([
      { label: 'Started', value: (c) => formatTime(c.created_at_ms) },
      { label: 'For', value: (c) => (c.kind === 'subscription' ? `${c.plan} plan` : 'top-up') },
      { label: 'Amount', value: amount },
      { label: 'State', value: state },
      {
        label: 'Checkout',
        // An open checkout can still be paid: the processor's page is its link.
        value: (c) => (c.state === 'open' && c.checkout_url
          ? h('a', { href: c.checkout_url }, 'Continue to payment')
          : h('code', { class: 'digest' }, c.session_id || c.id)),
      },
    ], checkouts, { caption: 'Top-ups and plan payments', empty: 'No payments yet.' }));
  } catch (error) {
    box.replaceChildren(errorBox(error));
  }
}
