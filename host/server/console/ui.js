// Small DOM helpers. Text always goes in through textContent, never as HTML,
// so nothing a server or user wrote can become markup.

/** h('button', {class: 'x', onclick: f}, 'text', child…) */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      element.addEventListener(name.slice(2), value);
    } else if (name === 'class') {
      element.className = value;
    } else if (value === true) {
      element.setAttribute(name, '');
    } else {
      element.setAttribute(name, String(value));
    }
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/**
 * Replaces an element's children, skipping null, undefined and false as h()
 * does (the DOM's own replaceChildren would print them as text).
 */
export function replace(element, ...children) {
  element.replaceChildren(...children.flat().filter((c) => c !== undefined && c !== null && c !== false));
}

export function svg(tag, attrs = {}, ...children) {
  const element = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) element.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** A page's frame: heading, optional intro, then the body. */
export function page(title, ...body) {
  return h('section', { class: 'page', 'aria-labelledby': 'page-title' },
    h('h1', { id: 'page-title' }, title), ...body);
}

/** A table from column specs [{label, value(row) → text|Node}]. */
export function table(columns, rows, { caption, empty = 'Nothing yet.', rowAttrs } = {}) {
  if (!rows.length) return h('p', { class: 'empty' }, empty);
  return h('div', { class: 'table-wrap' },
    h('table', {},
      caption ? h('caption', { class: 'visually-hidden' }, caption) : null,
      h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col' }, c.label)))),
      h('tbody', {}, rows.map((row) => h('tr', rowAttrs ? rowAttrs(row) : {},
        columns.map((c) => h('td', { 'data-label': c.label }, c.value(row))))))));
}

let toastTimer = null;
export function toast(message, kind = 'info') {
  const box = document.getElementById('toast');
  box.textContent = message;
  box.className = `show ${kind}`;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { box.className = ''; }, 5000);
}

/** Shows an error in the page (not only in a toast, so tests and screen readers see it). */
export function errorBox(error) {
  return h('p', { class: 'error', role: 'alert' }, error.message || String(error));
}

/** A labelled figure in a `.stats` grid. */
export function stat(label, value, testid) {
  return h('div', { class: 'stat' }, h('span', { class: 'stat-label' }, label),
    h('span', { class: 'stat-value', 'data-testid': testid }, value));
}

export function loading() {
  return h('p', { class: 'loading', 'aria-busy': 'true' }, 'Loading…');
}

/** A secret shown once, with a copy button. */
export function secretBox(label, secret, note) {
  const value = h('code', { class: 'secret', 'data-testid': 'secret' }, secret);
  const copy = h('button', {
    type: 'button',
    onclick: async () => {
      try {
        await navigator.clipboard.writeText(secret);
        copy.textContent = 'Copied';
      } catch {
        const range = document.createRange();
        range.selectNodeContents(value);
        const selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        copy.textContent = 'Selected: press Ctrl+C';
      }
    },
  }, 'Copy');
  return h('div', { class: 'secret-box', role: 'region', 'aria-label': label },
    h('p', {}, h('strong', {}, label)), h('div', { class: 'secret-row' }, value, copy),
    h('p', { class: 'hint' }, note || 'Shown only this once. Store it now; it cannot be shown again.'));
}

export function field(label, input, hint) {
  const id = input.id || `f-${Math.random().toString(36).slice(2)}`;
  input.id = id;
  return h('div', { class: 'field' }, h('label', { for: id }, label), input,
    hint ? h('small', {}, hint) : null);
}

export function formatTime(ms) {
  if (ms === null || ms === undefined) return '';
  return new Date(ms).toLocaleString();
}

export function formatSeconds(secs) {
  return secs ? new Date(secs * 1000).toLocaleString() : '';
}

// Money is exact: decimal USD strings are summed as integer nano-USD (BigInt).
export function nanos(usd) {
  if (usd === null || usd === undefined || usd === '') return 0n;
  const text = String(usd);
  const negative = text.startsWith('-');
  const [whole, fraction = ''] = text.replace('-', '').split('.');
  const value = BigInt(whole || '0') * 1000000000n + BigInt((fraction + '000000000').slice(0, 9));
  return negative ? -value : value;
}

/** Nano-USD as "$1.234567" with at least 2 and at most 9 decimals, exact. */
export function usd(nanoValue) {
  const negative = nanoValue < 0n;
  const value = negative ? -nanoValue : nanoValue;
  const whole = value / 1000000000n;
  let fraction = (value % 1000000000n).toString().padStart(9, '0').replace(/0+$/, '');
  if (fraction.length < 2) fraction = fraction.padEnd(2, '0');
  return `${negative ? '-' : ''}$${whole}.${fraction}`;
}

export function confirmAction(message) {
  return window.confirm(message);
}
