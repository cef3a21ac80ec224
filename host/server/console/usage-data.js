// The request log, read page by page through `usage.list`, and summed
// exactly (nano-USD as BigInt) for the overview and the charts.

import { op } from './api.js';
import { scoped } from './state.js';
import { nanos } from './ui.js';

/** Every entry since `sinceMs`, newest first, up to `cap` (then `truncated`). */
export async function entriesSince(sinceMs, cap = 5000) {
  const entries = [];
  let cursor;
  while (entries.length < cap) {
    const page = await op('usage.list', scoped({ since_ms: sinceMs, limit: 500, cursor }));
    entries.push(...page.entries);
    if (!page.next_cursor) return { entries, truncated: false };
    cursor = page.next_cursor;
  }
  return { entries, truncated: true };
}

export function startOfMonthMs(now = new Date()) {
  return new Date(now.getFullYear(), now.getMonth(), 1).getTime();
}

export function dayKey(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
}

/** Sums cost and counts requests, per key of `by(entry)`. */
export function group(entries, by) {
  const groups = new Map();
  for (const entry of entries) {
    const key = by(entry);
    const g = groups.get(key) || { cost: 0n, requests: 0 };
    g.cost += nanos(entry.cost_usd);
    g.requests += 1;
    groups.set(key, g);
  }
  return groups;
}

export function total(entries) {
  return entries.reduce((sum, e) => sum + nanos(e.cost_usd), 0n);
}
