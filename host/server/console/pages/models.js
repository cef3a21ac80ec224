// The model catalog (GET /v1/models): prices per million tokens, context
// and availability, searchable.

import { get } from '../api.js';
import { h, page, table, errorBox, loading, field } from '../ui.js';
import { can } from '../state.js';

export async function render(main, params) {
  const query = h('input', { type: 'search', name: 'q', value: params.get('q') || '', placeholder: 'model, provider…' });
  const availableOnly = h('input', { type: 'checkbox', name: 'available', checked: params.get('available') === '1' });
  const body = h('div', {}, loading());
  main.append(page('Models',
    h('form', { class: 'filters', role: 'search', onsubmit: (e) => e.preventDefault() },
      field('Search', query), h('label', { class: 'check' }, availableOnly, ' Available only')),
    body));
  if (!can('inference')) {
    body.replaceChildren(h('p', { class: 'hint' }, 'Your role may not call the data plane, so the model catalog is not shown.'));
    return;
  }
  let models = [];
  const draw = () => {
    const q = query.value.trim().toLowerCase();
    const rows = models.filter((m) => (!q || `${m.id} ${m.name} ${m.service.provider_name}`.toLowerCase().includes(q))
      && (!availableOnly.checked || m.service.available));
    body.replaceChildren(h('p', { 'aria-live': 'polite' }, `${rows.length} of ${models.length} models`), table([
      { label: 'Model', value: (m) => h('code', {}, m.id) },
      { label: 'Provider', value: (m) => m.service.provider_name },
      { label: 'Input / Mtok', value: (m) => (m.pricing ? `$${m.pricing.input_per_mtok}` : 'unpriced') },
      { label: 'Output / Mtok', value: (m) => (m.pricing ? `$${m.pricing.output_per_mtok}` : '') },
      { label: 'Context', value: (m) => (m.context_length ? m.context_length.toLocaleString() : '') },
      {
        label: 'Available',
        value: (m) => (m.service.available ? h('span', { class: 'badge ok' }, 'yes')
          : h('span', { class: 'badge bad', title: m.service.unavailable_reason || '' }, 'no')),
      },
    ], rows.slice(0, 300), { caption: 'Models', empty: 'No model matches.' }),
    rows.length > 300 ? h('p', { class: 'hint' }, 'Showing the first 300; refine the search.') : null);
  };
  query.addEventListener('input', draw);
  availableOnly.addEventListener('change', draw);
  try {
    const list = await get('/v1/models');
    models = list.data || [];
    models.sort((a, b) => Number(b.service.available) - Number(a.service.available) || a.id.localeCompare(b.id));
    draw();
  } catch (error) {
    body.replaceChildren(errorBox(error));
  }
}
