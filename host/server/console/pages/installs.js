// Tool servers and skills installed in the workspace: each one's tools and
// MCP URL, install from a package name, change an install's version range,
// settings and approved origins, upgrade and uninstall. The Registry page
// finds packages; this page manages what is installed.

import { op } from '../api.js';
import { h, page, table, errorBox, loading, field, toast, formatTime, confirmAction } from '../ui.js';
import { scoped, can } from '../state.js';

const mcpUrl = (name) => `${location.origin}/v1/mcp${name ? `/${encodeURIComponent(name)}` : ''}`;

export async function render(main, params) {
  const writable = can('install.write');
  const status = h('div', { 'aria-live': 'polite' });
  const detail = h('div', {});
  const list = h('div', {}, loading());
  const refresh = () => listInstalls(list, detail, status, writable);
  main.append(page('Installs',
    h('p', { class: 'hint' }, 'Every install\'s tools are served over MCP at ', h('code', {}, mcpUrl()),
      ' (as ', h('code', {}, 'install__tool'), '), and each install alone at its own URL below. ',
      'Find packages on the ', h('a', { href: '#/registry' }, 'Registry'), ' page.'),
    writable ? null : h('p', { class: 'hint', 'data-testid': 'readonly' }, 'Your role may view installs but not change them.'),
    status, h('h2', {}, 'Installed in this workspace'), list, detail,
    writable ? createForm(status, refresh, params.get('package')) : null));
  await refresh();
}

/** "KEY=value" lines as an object; blank lines are skipped. */
function settings(text) {
  const out = {};
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    if (!trimmed) continue;
    const at = trimmed.indexOf('=');
    if (at < 1) throw new Error(`Settings are KEY=value lines; "${trimmed}" is not.`);
    out[trimmed.slice(0, at).trim()] = trimmed.slice(at + 1).trim();
  }
  return out;
}

const lines = (text) => text.split(/[\s,]+/).map((s) => s.trim()).filter(Boolean);

function createForm(status, after, preset) {
  const pkg = h('input', { type: 'text', name: 'package', required: true, placeholder: 'tollgate/calculator', value: preset || '' });
  const version = h('input', { type: 'text', name: 'version', placeholder: '* (newest)' });
  const name = h('input', { type: 'text', name: 'install-name', placeholder: 'the package\'s short name' });
  const config = h('textarea', { name: 'config', rows: 2, placeholder: 'KEY=value, one a line' });
  const origins = h('textarea', { name: 'origins', rows: 2, placeholder: 'https://api.example.com, one a line' });
  return h('form', {
    class: 'card',
    'data-testid': 'create-install',
    onsubmit: async (event) => {
      event.preventDefault();
      status.replaceChildren();
      try {
        const install = await op('installs.create', scoped({
          package: pkg.value.trim(),
          version: version.value.trim() || undefined,
          name: name.value.trim() || undefined,
          config: settings(config.value),
          origins: lines(origins.value),
        }));
        toast(`Installed ${install.name} ${install.version}`);
        for (const input of [pkg, version, name, config, origins]) input.value = '';
        await after();
      } catch (error) {
        status.replaceChildren(errorBox(error));
      }
    },
  }, h('h2', {}, 'Install a tool server or skill'), field('Package', pkg), field('Version range', version),
  field('Install as', name), field('Settings', config), field('Approved origins', origins,
    'Each must be covered by the package\'s allowed hosts. Credentials are set with the CLI or the A2A op.'),
  h('button', { type: 'submit' }, 'Install'));
}

async function listInstalls(box, detail, status, writable) {
  const refresh = () => listInstalls(box, detail, status, writable);
  try {
    const { installs } = await op('installs.list', scoped());
    box.replaceChildren(table([
      { label: 'Install', value: (i) => i.name },
      { label: 'Package', value: (i) => `${i.package}@${i.version}` },
      { label: 'Kind', value: (i) => i.kind },
      { label: 'Tools', value: (i) => (i.tools.length ? i.tools.join(', ') : 'none') },
      { label: 'MCP URL', value: (i) => h('code', { class: 'digest' }, mcpUrl(i.name)) },
      {
        label: 'Actions',
        value: (i) => h('div', { class: 'row-actions' },
          h('button', {
            type: 'button', class: 'secondary', 'aria-label': `${writable ? 'Manage' : 'Details of'} ${i.name}`,
            onclick: () => showInstall(detail, status, i.name, writable, refresh),
          }, writable ? 'Manage' : 'Details'),
          writable ? h('button', {
            type: 'button',
            class: 'danger',
            'aria-label': `Uninstall ${i.name}`,
            onclick: async () => {
              if (!confirmAction(`Uninstall ${i.name}? Its tools disappear from MCP at once.`)) return;
              try {
                await op('installs.delete', scoped({ name: i.name }));
                toast(`Uninstalled ${i.name}`);
                detail.replaceChildren();
                await refresh();
              } catch (error) { toast(error.message, 'error'); }
            },
          }, 'Uninstall') : null),
      },
    ], installs, { caption: 'Installs', empty: 'Nothing installed.' }));
  } catch (error) {
    box.replaceChildren(errorBox(error));
  }
}

function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

async function showInstall(box, status, name, writable, refresh) {
  box.replaceChildren(loading());
  try {
    const i = await op('installs.get', scoped({ name }));
    const credentials = Object.entries(i.credentials || {});
    const pinned = Object.entries(i.lock || {});
    const heading = h('h2', { tabindex: '-1' }, `Install ${i.name}`);
    box.replaceChildren(h('div', { class: 'card', 'data-testid': 'install' },
      heading,
      facts([
        ['Package', `${i.package} (${i.kind})`],
        ['Version', `${i.version}, from range ${i.requirement}`],
        ['Digest', h('code', { class: 'digest' }, i.digest)],
        ['MCP URL', h('code', { class: 'digest' }, mcpUrl(i.name))],
        ['Tools', i.tools.length ? i.tools.join(', ') : 'none'],
        ['Settings', Object.keys(i.config).length ? Object.entries(i.config).map(([k, v]) => `${k}=${v}`).join(', ') : 'none'],
        ['Approved origins', i.origins.length ? i.origins.join(', ') : 'none'],
        ['Credentials', credentials.length ? credentials.map(([k, c]) => `${k} (${c.placement})`).join(', ') : 'none'],
        ['Pinned dependencies', pinned.length ? pinned.map(([k, p]) => `${k}@${p.version}`).join(', ') : 'none'],
        ['Installed', formatTime(i.created_at_ms)], ['Updated', formatTime(i.updated_at_ms)],
      ]),
      writable ? editForm(i, status, async () => { await refresh(); await showInstall(box, status, name, writable, refresh); }) : null,
      h('p', {}, h('button', { type: 'button', class: 'link', onclick: () => box.replaceChildren() }, 'Close'))));
    // The card opens below the list: take the reader (and keyboard focus) there.
    heading.focus();
  } catch (error) {
    box.replaceChildren(errorBox(error));
  }
}

function editForm(i, status, after) {
  const version = h('input', { type: 'text', name: 'edit-version', value: i.requirement });
  const config = h('textarea', { name: 'edit-config', rows: 3 });
  config.value = Object.entries(i.config).map(([k, v]) => `${k}=${v}`).join('\n');
  const origins = h('textarea', { name: 'edit-origins', rows: 2 });
  origins.value = i.origins.join('\n');
  const save = async (params, done) => {
    status.replaceChildren();
    try {
      const updated = await op('installs.update', scoped({ name: i.name, ...params }));
      toast(`${done}: ${updated.name} ${updated.version}`);
      await after();
    } catch (error) {
      status.replaceChildren(errorBox(error));
    }
  };
  return h('form', {
    class: 'edit-install',
    onsubmit: async (event) => {
      event.preventDefault();
      let config2;
      try { config2 = settings(config.value); } catch (error) { status.replaceChildren(errorBox(error)); return; }
      await save({ version: version.value.trim() || undefined, config: config2, origins: lines(origins.value) }, 'Saved');
    },
  }, h('h3', {}, 'Change'), field('Version range', version), field('Settings', config), field('Approved origins', origins),
  h('div', { class: 'actions' },
    h('button', { type: 'submit' }, 'Save changes'),
    // An update with nothing changed resolves the range again: an upgrade.
    h('button', { type: 'button', class: 'secondary', onclick: () => save({}, 'Upgraded') }, 'Upgrade to the newest match')));
}
