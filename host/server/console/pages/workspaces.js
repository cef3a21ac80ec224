// Workspaces (create, rename) and the selected workspace's namespaces.

import { op } from '../api.js';
import { h, page, table, errorBox, loading, field, toast, formatSeconds, confirmAction } from '../ui.js';
import { scoped, can, state } from '../state.js';
import { refreshWorkspaces } from '../app.js';

export async function render(main) {
  const status = h('div', { 'aria-live': 'polite' });
  const namespaces = h('div', {}, loading());
  const name = h('input', { type: 'text', name: 'workspace', required: true, maxlength: 100 });
  const create = state.session.scope === 'user' ? h('form', {
    class: 'card',
    onsubmit: async (event) => {
      event.preventDefault();
      try {
        const created = await op('workspaces.create', { name: name.value });
        toast(`Created ${created.name}`);
        name.value = '';
        await refreshWorkspaces();
        await render(main.replaceChildren() || main);
      } catch (error) {
        status.replaceChildren(errorBox(error));
      }
    },
  }, h('h2', {}, 'New workspace'), field('Name', name), h('button', { type: 'submit' }, 'Create workspace')) : null;
  main.append(page('Workspaces', create, status,
    table([
      { label: 'Name', value: (w) => w.name },
      { label: 'Id', value: (w) => w.workspace_id },
      { label: 'Your role', value: (w) => w.role },
      { label: 'Plan', value: (w) => w.plan },
      { label: 'Created', value: (w) => formatSeconds(w.created_at) },
    ], state.workspaces, { caption: 'Workspaces' }),
    h('h2', {}, 'Namespaces in this workspace'), namespaces));
  await refreshNamespaces(namespaces);
}

async function refreshNamespaces(box) {
  const writable = can('namespace.write');
  try {
    const list = await op('namespaces.list', scoped());
    const name = h('input', { type: 'text', name: 'namespace', required: true, pattern: '[a-z0-9][a-z0-9-]*' });
    box.replaceChildren(
      table([
        { label: 'Namespace', value: (n) => n.name },
        { label: 'Created', value: (n) => formatSeconds(n.created_at) },
        {
          label: 'Actions',
          value: (n) => (writable ? h('button', {
            type: 'button',
            class: 'danger',
            'aria-label': `Delete namespace ${n.name}`,
            onclick: async () => {
              if (!confirmAction(`Delete namespace ${n.name}?`)) return;
              try {
                await op('namespaces.delete', scoped({ name: n.name }));
                await refreshNamespaces(box);
              } catch (error) { toast(error.message, 'error'); }
            },
          }, 'Delete') : ''),
        },
      ], list.namespaces || [], { caption: 'Namespaces', empty: 'No namespaces yet.' }),
      writable ? h('form', {
        class: 'inline',
        onsubmit: async (event) => {
          event.preventDefault();
          try {
            await op('namespaces.create', scoped({ name: name.value }));
            await refreshNamespaces(box);
          } catch (error) { toast(error.message, 'error'); }
        },
      }, field('New namespace', name), h('button', { type: 'submit' }, 'Create namespace')) : null);
  } catch (error) {
    box.replaceChildren(errorBox(error));
  }
}
