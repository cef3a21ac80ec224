// API keys: list, create (the secret shown once, with a copy button), revoke.

import { op } from '../api.js';
import { h, page, table, errorBox, loading, secretBox, field, formatSeconds, toast, confirmAction } from '../ui.js';
import { scoped, can } from '../state.js';

export async function render(main) {
  const created = h('div', { 'aria-live': 'polite' });
  const listBox = h('div', {}, loading());
  const writable = can('key.write');
  main.append(page('API keys',
    writable ? createForm(created, () => refresh(listBox, writable)) : h('p', { class: 'hint', 'data-testid': 'readonly' },
      'Your role may view keys but not create or revoke them.'),
    created, h('h2', {}, 'Keys'), listBox));
  await refresh(listBox, writable);
}

function createForm(created, after) {
  const name = h('input', { type: 'text', name: 'name', placeholder: 'e.g. ci', maxlength: 100 });
  const scope = h('select', { name: 'scope' }, h('option', { value: 'user' }, 'user: all my workspaces'),
    h('option', { value: 'workspace' }, 'workspace: only this one'));
  const rpm = h('input', { type: 'number', name: 'rpm', min: 1, placeholder: 'gateway default' });
  return h('form', {
    class: 'card',
    'data-testid': 'create-key',
    onsubmit: async (event) => {
      event.preventDefault();
      created.replaceChildren();
      try {
        const key = await op('keys.create', scoped({
          name: name.value || undefined,
          scope: scope.value,
          requests_per_minute: rpm.value ? Number(rpm.value) : undefined,
        }));
        created.replaceChildren(secretBox(`New key ${key.name || key.key_id}`, key.api_key));
        name.value = '';
        await after();
      } catch (error) {
        created.replaceChildren(errorBox(error));
      }
    },
  }, h('h2', {}, 'Create a key'), field('Name', name), field('Scope', scope),
  field('Requests per minute', rpm, 'Optional; can only tighten the gateway limit.'),
  h('button', { type: 'submit' }, 'Create key'));
}

async function refresh(box, writable) {
  try {
    const { keys } = await op('keys.list', scoped());
    box.replaceChildren(table([
      { label: 'Name', value: (k) => k.name || '—' },
      { label: 'Key', value: (k) => h('code', {}, k.hint) },
      { label: 'Id', value: (k) => k.key_id },
      { label: 'Scope', value: (k) => k.scope },
      { label: 'Limit', value: (k) => (k.requests_per_minute ? `${k.requests_per_minute}/min` : 'default') },
      { label: 'Created', value: (k) => formatSeconds(k.created_at) },
      { label: 'Status', value: (k) => (k.revoked_at ? h('span', { class: 'badge bad' }, 'revoked') : h('span', { class: 'badge ok' }, 'active')) },
      {
        label: 'Actions',
        value: (k) => (writable && !k.revoked_at ? h('button', {
          type: 'button',
          class: 'danger',
          'aria-label': `Revoke ${k.name || k.key_id}`,
          onclick: async () => {
            if (!confirmAction(`Revoke key ${k.name || k.key_id}? Requests with it fail at once.`)) return;
            try {
              await op('keys.revoke', scoped({ key_id: k.key_id }));
              toast('Key revoked');
              await refresh(box, writable);
            } catch (error) {
              toast(error.message, 'error');
            }
          },
        }, 'Revoke') : ''),
      },
    ], keys, { caption: 'API keys' }));
  } catch (error) {
    box.replaceChildren(errorBox(error));
  }
}
