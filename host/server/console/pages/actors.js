// Hosted actors and their deployments.

import { op } from '../api.js';
import { h, page, table, errorBox, loading, formatTime, toast, confirmAction, replace } from '../ui.js';
import { scoped, can } from '../state.js';

export async function render(main) {
  const actors = h('div', {}, loading());
  const deployments = h('div', {}, loading());
  main.append(page('Actors', h('p', { class: 'hint' }, 'Publish actors with ', h('code', {}, 'tollgate actors publish'),
    '; runs appear in Requests with their provenance trail.'),
  h('h2', {}, 'Deployments'), deployments, h('h2', {}, 'Published actors'), actors));
  try {
    const list = await op('actors.list', scoped());
    actors.replaceChildren(table([
      { label: 'Package', value: (a) => `${a.package}@${a.version}` },
      { label: 'Id', value: (a) => h('code', {}, a.id) },
      { label: 'Published', value: (a) => formatTime(a.created_at_ms) },
    ], list.actors, { caption: 'Actors', empty: 'No actors published.' }));
  } catch (error) {
    actors.replaceChildren(errorBox(error));
  }
  await listDeployments(deployments);
}

async function listDeployments(box) {
  const writable = can('actor.write');
  try {
    const list = await op('deployments.list', scoped());
    replace(box,
      list.limit ? h('p', {}, `${list.deployments.length} of ${list.limit} deployments.`) : null,
      table([
        { label: 'Deployment', value: (d) => `${d.namespace}/${d.name}` },
        { label: 'URL', value: (d) => h('code', {}, d.path) },
        { label: 'Chat model', value: (d) => h('code', {}, d.model) },
        { label: 'Actor', value: (d) => h('code', {}, d.actor_id.slice(0, 12)) },
        { label: 'Updated', value: (d) => formatTime(d.updated_at_ms) },
        {
          label: 'Actions',
          value: (d) => (writable ? h('button', {
            type: 'button',
            class: 'danger',
            'aria-label': `Delete deployment ${d.namespace}/${d.name}`,
            onclick: async () => {
              if (!confirmAction(`Delete ${d.namespace}/${d.name}? Its URL answers 404 at once.`)) return;
              try {
                await op('deployments.delete', scoped({ namespace: d.namespace, name: d.name }));
                await listDeployments(box);
              } catch (error) { toast(error.message, 'error'); }
            },
          }, 'Delete') : ''),
        },
      ], list.deployments, { caption: 'Deployments', empty: 'No deployments.' }));
  } catch (error) {
    box.replaceChildren(errorBox(error));
  }
}
