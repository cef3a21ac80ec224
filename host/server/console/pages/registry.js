// The package registry: search packages, see versions, install and
// uninstall tool servers and skills in the selected workspace.

import { op } from '../api.js';
import { h, page, table, errorBox, loading, field, toast, formatTime, confirmAction } from '../ui.js';
import { scoped, can } from '../state.js';

const KINDS = ['', 'tool-server', 'skill', 'provider-adapter', 'actor', 'prompt-template', 'graph'];
const INSTALLABLE = ['tool-server', 'skill'];

export async function render(main, params) {
  const q = h('input', { type: 'search', name: 'q', value: params.get('q') || '', placeholder: 'name or description' });
  const kind = h('select', { name: 'kind' }, KINDS.map((k) => h('option', { value: k, selected: k === (params.get('kind') || '') }, k || 'any kind')));
  const results = h('div', {}, loading());
  const installed = h('div', {}, loading());
  const detail = h('div', { 'aria-live': 'polite' });
  main.append(page('Registry',
    h('form', {
      class: 'filters',
      role: 'search',
      onsubmit: (event) => {
        event.preventDefault();
        const s = new URLSearchParams();
        if (q.value) s.set('q', q.value);
        if (kind.value) s.set('kind', kind.value);
        location.hash = `#/registry?${s}`;
      },
    }, field('Search', q), field('Kind', kind), h('button', { type: 'submit' }, 'Search')),
    detail, h('h2', {}, 'Packages'), results, h('h2', {}, 'Installed in this workspace'),
    h('p', { class: 'hint' }, 'Change settings, upgrade and see MCP URLs on the ', h('a', { href: '#/installs' }, 'Installs'), ' page.'),
    installed));
  const refreshInstalled = () => listInstalls(installed);
  try {
    const found = await op('packages.search', { q: params.get('q') || undefined, kind: params.get('kind') || undefined, limit: 100 });
    results.replaceChildren(table([
      {
        label: 'Package',
        value: (p) => h('button', { type: 'button', class: 'link', onclick: () => showPackage(detail, p.name, refreshInstalled) }, p.name),
      },
      { label: 'Kind', value: (p) => p.kind },
      { label: 'Latest', value: (p) => p.latest || '' },
      { label: 'Description', value: (p) => p.description },
    ], found.packages, { caption: 'Packages', empty: 'No package matches.' }));
  } catch (error) {
    results.replaceChildren(errorBox(error));
  }
  await refreshInstalled();
}

async function showPackage(box, name, refreshInstalled) {
  box.replaceChildren(loading());
  try {
    const info = await op('packages.get', { name });
    const installable = INSTALLABLE.includes(info.kind) && can('install.write');
    const installName = h('input', { type: 'text', name: 'install-name', placeholder: name.split('/')[1] });
    box.replaceChildren(h('div', { class: 'card', 'data-testid': 'package' },
      h('h2', {}, info.name), h('p', {}, `${info.kind}: ${info.description}`),
      table([
        { label: 'Version', value: (v) => v.version },
        { label: 'Published', value: (v) => formatTime(v.published_at_ms) },
        { label: 'Size', value: (v) => `${v.size} B` },
        { label: 'State', value: (v) => (v.yanked ? 'yanked' : v.deprecated ? `deprecated: ${v.deprecated}` : 'current') },
        { label: 'Digest', value: (v) => h('code', { class: 'digest' }, v.digest) },
      ], info.versions, { caption: 'Versions' }),
      installable ? h('form', {
        class: 'inline',
        onsubmit: async (event) => {
          event.preventDefault();
          try {
            const install = await op('installs.create', scoped({ package: name, name: installName.value || undefined }));
            toast(`Installed ${install.name} ${install.version}`);
            await refreshInstalled();
          } catch (error) {
            box.append(errorBox(error));
          }
        },
      }, field('Install as', installName), h('button', { type: 'submit' }, `Install ${name}`)) : null));
  } catch (error) {
    box.replaceChildren(errorBox(error));
  }
}

async function listInstalls(box) {
  const writable = can('install.write');
  try {
    const { installs } = await op('installs.list', scoped());
    box.replaceChildren(table([
      { label: 'Install', value: (i) => i.name },
      { label: 'Package', value: (i) => `${i.package}@${i.version}` },
      { label: 'Kind', value: (i) => i.kind },
      { label: 'Tools', value: (i) => (i.tools || []).map((t) => t.name || t).join(', ') },
      {
        label: 'Actions',
        value: (i) => (writable ? h('button', {
          type: 'button',
          class: 'danger',
          'aria-label': `Uninstall ${i.name}`,
          onclick: async () => {
            if (!confirmAction(`Uninstall ${i.name}?`)) return;
            try {
              await op('installs.delete', scoped({ name: i.name }));
              toast(`Uninstalled ${i.name}`);
              await listInstalls(box);
            } catch (error) { toast(error.message, 'error'); }
          },
        }, 'Uninstall') : ''),
      },
    ], installs, { caption: 'Installs', empty: 'Nothing installed.' }));
  } catch (error) {
    box.replaceChildren(errorBox(error));
  }
}
