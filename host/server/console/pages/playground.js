// The playground: a chat with any available model or deployed actor,
// streamed through the same /v1/chat/completions every client calls, with
// each answer's exact cost and a link to its trace on the Requests page.

import { get, op, chatStream } from '../api.js';
import { h, page, errorBox, loading, field, usd, nanos, replace } from '../ui.js';
import { can, scoped, state } from '../state.js';

export async function render(main, params) {
  const body = h('div', {}, loading());
  main.append(page('Playground', body));
  if (!can('inference')) {
    body.replaceChildren(h('p', { class: 'hint', 'data-testid': 'readonly' },
      'Your role may not call the data plane, so it cannot use the playground.'));
    return;
  }
  let models;
  try {
    models = await choices();
  } catch (error) {
    body.replaceChildren(errorBox(error));
    return;
  }
  if (!models.length) {
    body.replaceChildren(h('p', { class: 'empty' }, 'No model is available, and no actor is deployed.'));
    return;
  }
  body.replaceChildren(...chat(models, params.get('model')));
}

/** Available models, then deployed actors (callable as `actor/ns/name`). */
async function choices() {
  const list = await get('/v1/models');
  const models = (list.data || []).filter((m) => m.service && m.service.available)
    .map((m) => ({ id: m.id, label: m.id, group: 'Models' }))
    .sort((a, b) => a.id.localeCompare(b.id));
  // A role without actor.read still chats; it just sees no actors.
  if (can('actor.read')) {
    const { deployments } = await op('deployments.list', scoped()).catch(() => ({ deployments: [] }));
    for (const d of deployments || []) {
      models.push({ id: d.model, label: `${d.namespace}/${d.name}`, group: 'Deployed actors' });
    }
  }
  return models;
}

function chat(models, wanted) {
  const groups = [...new Set(models.map((m) => m.group))];
  const model = h('select', { name: 'model' }, groups.map((g) => h('optgroup', { label: g },
    models.filter((m) => m.group === g).map((m) => h('option', { value: m.id, selected: m.id === wanted }, m.label)))));
  const system = h('textarea', { name: 'system', rows: 2, placeholder: 'Optional instructions for the model' });
  const prompt = h('textarea', { name: 'prompt', rows: 3, required: true, placeholder: 'Say something… (Ctrl+Enter sends)' });
  const send = h('button', { type: 'submit' }, 'Send');
  const transcript = h('ol', { class: 'chat', 'aria-label': 'Conversation' });
  // The conversation so far, sent whole each turn as any chat client does.
  let messages = [];
  const clear = h('button', {
    type: 'button',
    class: 'secondary',
    onclick: () => { messages = []; transcript.replaceChildren(); prompt.focus(); },
  }, 'New chat');
  // Ctrl+Enter (⌘+Enter) sends, as in most chat tools; Enter alone is a new line.
  prompt.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && (event.ctrlKey || event.metaKey)) form.requestSubmit();
  });
  const form = h('form', {
    class: 'card playground',
    onsubmit: async (event) => {
      event.preventDefault();
      const text = prompt.value.trim();
      if (!text) return;
      const turn = [...messages, { role: 'user', content: text }];
      const sent = system.value.trim() ? [{ role: 'system', content: system.value.trim() }, ...turn] : turn;
      transcript.append(h('li', { class: 'turn user' }, h('span', { class: 'who-said' }, 'You'), h('p', {}, text)));
      prompt.value = '';
      send.disabled = true;
      const reply = await answer(model.value, sent, transcript);
      send.disabled = false;
      if (reply !== null) messages = [...turn, { role: 'assistant', content: reply }];
      prompt.focus();
    },
  }, field('Model', model), field('System', system), field('Message', prompt),
  h('div', { class: 'actions' }, send, clear));
  // The data plane bills the workspace the session acts in, whatever the
  // picker shows, so say so when they differ.
  const elsewhere = state.session.workspace_id && state.workspaceId !== state.session.workspace_id;
  return [
    h('p', { class: 'hint' }, 'Answers stream from ', h('code', {}, 'POST /v1/chat/completions'),
      ' and are billed like any request', elsewhere ? ' to the workspace you signed in to, not the one picked above.' : '.'),
    form, transcript,
  ];
}

/** Streams one answer into the transcript; returns its text, or null on failure. */
async function answer(model, messages, transcript) {
  const text = h('p', { class: 'answer' });
  const meta = h('p', { class: 'answer-meta', 'aria-live': 'polite' }, 'Streaming…');
  const item = h('li', { class: 'turn assistant', 'aria-busy': 'true' },
    h('span', { class: 'who-said' }, model), text, meta);
  transcript.append(item);
  let content = '';
  let cost = null;
  let usage = null;
  let serviceId = '';
  try {
    const headerId = await chatStream({ model, messages }, (chunk) => {
      const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
      if (delta && typeof delta.content === 'string') {
        content += delta.content;
        text.textContent = content;
      }
      // The closing chunk carries the billed usage and the service block.
      if (chunk.usage) {
        usage = chunk.usage;
        // A number here (OpenRouter's convention); the exact string is service.cost_usd.
        const c = chunk.usage.cost;
        if (c !== undefined && c !== null) cost = typeof c === 'number' ? c.toFixed(9) : String(c);
      }
      if (chunk.service) {
        if (chunk.service.cost_usd !== undefined) cost = chunk.service.cost_usd;
        if (chunk.service.request_id) serviceId = chunk.service.request_id;
      }
    });
    const requestId = serviceId || headerId;
    const tokens = usage ? ` · ${usage.prompt_tokens ?? '–'} in / ${usage.completion_tokens ?? '–'} out tokens` : '';
    replace(meta,
      h('span', { 'data-testid': 'answer-cost' }, cost === null ? 'cost not reported' : `Cost ${usd(nanos(cost))}`),
      tokens,
      requestId ? [' · ', h('a', { href: `#/requests?id=${encodeURIComponent(requestId)}` }, `trace ${requestId}`)] : null);
    return content;
  } catch (error) {
    meta.replaceChildren(errorBox(error));
    return null;
  } finally {
    item.removeAttribute('aria-busy');
  }
}
