// The console's entry: sign-in, the workspace picker, navigation and the
// hash router (#/keys …). Each page is a module in pages/ exporting
// `render(main, params)`.

import * as api from './api.js';
import { h, page, errorBox, secretBox, field, toast } from './ui.js';
import { state, can, role } from './state.js';

const pages = {
  overview: () => import('./pages/overview.js'),
  usage: () => import('./pages/usage.js'),
  requests: () => import('./pages/requests.js'),
  keys: () => import('./pages/keys.js'),
  members: () => import('./pages/members.js'),
  workspaces: () => import('./pages/workspaces.js'),
  models: () => import('./pages/models.js'),
  registry: () => import('./pages/registry.js'),
  actors: () => import('./pages/actors.js'),
  playground: () => import('./pages/playground.js'),
  billing: () => import('./pages/billing.js'),
  budgets: () => import('./pages/budgets.js'),
  installs: () => import('./pages/installs.js'),
  audit: () => import('./pages/audit.js'),
};

const main = () => document.getElementById('main');

function applyTheme(theme) {
  if (theme) document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

function setupChrome() {
  applyTheme(localStorage.getItem('tg-theme'));
  document.getElementById('theme').addEventListener('click', () => {
    const dark = document.documentElement.dataset.theme
      ? document.documentElement.dataset.theme === 'dark'
      : window.matchMedia('(prefers-color-scheme: dark)').matches;
    const next = dark ? 'light' : 'dark';
    localStorage.setItem('tg-theme', next);
    applyTheme(next);
  });
  const menu = document.getElementById('menu');
  const nav = document.getElementById('nav');
  menu.addEventListener('click', () => {
    const open = nav.classList.toggle('open');
    menu.setAttribute('aria-expanded', String(open));
    if (open) nav.querySelector('a').focus();
  });
  nav.addEventListener('click', (event) => {
    if (event.target.closest('a')) {
      nav.classList.remove('open');
      menu.setAttribute('aria-expanded', 'false');
    }
  });
  document.getElementById('signout').addEventListener('click', async () => {
    try { await api.signOut(); } catch (error) { toast(error.message, 'error'); }
    state.session = null;
    location.hash = '#/signin';
    await start();
  });
  document.getElementById('workspace').addEventListener('change', (event) => {
    state.workspaceId = event.target.value;
    sessionStorage.setItem('tg-workspace', state.workspaceId);
    showChrome(true);
    route();
  });
  window.addEventListener('hashchange', route);
}

function showChrome(signedIn) {
  for (const id of ['nav', 'signout', 'menu', 'workspace-picker']) {
    document.getElementById(id).hidden = !signedIn;
  }
  const who = document.getElementById('who');
  who.textContent = signedIn ? whoText() : '';
  // The role differs per workspace: offer only the pages it may use.
  for (const link of document.querySelectorAll('#nav a[data-needs]')) {
    link.parentElement.hidden = signedIn && !can(link.dataset.needs);
  }
}

/** "ada@example.com · owner", or "… (API key) · viewer" for a key's session. */
function whoText() {
  const name = (state.me && (state.me.email || state.me.name)) || state.session.user_id || 'signed in';
  return `${name}${state.session.kind === 'key' ? ' (API key)' : ''} · ${role()}`;
}

// The session names its user by id only; the members list has the e-mail.
async function loadMe() {
  state.me = null;
  if (!state.session.user_id) return;
  try {
    const { members } = await api.op('members.list', { workspace_id: state.session.workspace_id });
    state.me = members.find((m) => m.user_id === state.session.user_id) || null;
  } catch {
    state.me = null;
  }
}

async function loadWorkspaces() {
  try {
    const list = await api.op('workspaces.list');
    state.workspaces = list.workspaces || [];
  } catch {
    state.workspaces = [];
  }
  const remembered = sessionStorage.getItem('tg-workspace');
  const ids = state.workspaces.map((w) => w.workspace_id);
  state.workspaceId = ids.includes(remembered) ? remembered
    : (ids.includes(state.session.workspace_id) ? state.session.workspace_id : ids[0] || state.session.workspace_id);
  const select = document.getElementById('workspace');
  select.replaceChildren(...state.workspaces.map((w) =>
    h('option', { value: w.workspace_id, selected: w.workspace_id === state.workspaceId }, `${w.name} (${w.role})`)));
}

export async function refreshWorkspaces() {
  await loadWorkspaces();
  showChrome(true);
}

async function start() {
  try {
    state.session = await api.session();
  } catch (error) {
    main().replaceChildren(page('Tollgate', errorBox(error)));
    return;
  }
  if (!state.session) {
    showChrome(false);
    await renderSignIn();
    return;
  }
  state.firstKey = state.session.first_key || null;
  await Promise.all([loadWorkspaces(), loadMe()]);
  showChrome(true);
  if (state.firstKey) location.hash = '#/welcome';
  else if (!location.hash || location.hash === '#/signin') location.hash = '#/overview';
  await route();
}

// Routes overlap: a workspace switch and a hash change can each start one
// while an earlier one still loads its page module. Only the latest may
// show, so each renders into its own view and a superseded one is dropped.
let latestRoute = 0;

async function route() {
  if (!state.session) return;
  const generation = ++latestRoute;
  const [name, query] = location.hash.replace(/^#\/?/, '').split('?');
  const params = new URLSearchParams(query || '');
  for (const link of document.querySelectorAll('#nav a')) {
    if (link.getAttribute('href') === `#/${name}`) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  const target = main();
  if (name === 'welcome') {
    renderWelcome(target);
    return;
  }
  if (name === 'signin-failed') {
    target.replaceChildren(page('Sign-in failed', signInFailure(params),
      h('p', {}, 'You are still signed in from before. ', h('a', { href: '#/overview' }, 'Continue to the overview'), '.')));
    document.title = 'Sign-in failed · Tollgate';
    return;
  }
  const load = pages[name] || pages.overview;
  const view = h('div', { class: 'view' });
  try {
    const module = await load();
    if (generation !== latestRoute) return;
    target.replaceChildren(view);
    await module.render(view, params);
  } catch (error) {
    if (generation !== latestRoute) return;
    target.replaceChildren(page('Error', errorBox(error)));
  }
  if (generation !== latestRoute) return;
  document.title = `${(document.getElementById('page-title') || {}).textContent || 'Console'} · Tollgate`;
}

function renderWelcome(target) {
  const key = state.firstKey;
  const body = key
    ? [h('p', {}, 'Your account and workspace are ready. This is your first API key:'),
      secretBox('Your first API key', key),
      h('p', {}, 'Use it as the bearer token with any OpenAI client, base URL ', h('code', {}, `${location.origin}/v1`), '.')]
    : [h('p', {}, 'Welcome back.')];
  target.replaceChildren(page('Welcome', ...body,
    h('p', {}, h('a', { href: '#/overview', class: 'button', onclick: () => { state.firstKey = null; } }, 'Continue to the overview'))));
  document.title = 'Welcome · Tollgate';
}

/** Why an OIDC sign-in failed, as the gateway's redirect said. */
function signInFailure(params) {
  const reason = params.get('reason') || 'The sign-in did not complete.';
  const id = params.get('request_id');
  return h('div', { class: 'notice bad', role: 'alert', 'data-testid': 'signin-failed' },
    h('p', {}, h('strong', {}, 'The sign-in failed: '), reason),
    id ? h('p', { class: 'hint' }, 'Request id ', h('code', {}, id), ' (for the gateway\'s log).') : null);
}

async function renderSignIn() {
  const target = main();
  const [name, query] = location.hash.replace(/^#\/?/, '').split('?');
  const failure = name === 'signin-failed' ? signInFailure(new URLSearchParams(query || '')) : null;
  let choices = { oidc: [] };
  try { choices = await api.providers(); } catch { /* the key form still works */ }
  const input = h('input', { type: 'password', name: 'api_key', autocomplete: 'off', placeholder: 'tg_live_…', required: true });
  const status = h('div', { 'aria-live': 'polite' });
  const form = h('form', {
    class: 'card',
    onsubmit: async (event) => {
      event.preventDefault();
      status.replaceChildren();
      try {
        await api.signInWithKey(input.value.trim());
        input.value = '';
        location.hash = '#/overview';
        await start();
      } catch (error) {
        status.replaceChildren(errorBox(error));
      }
    },
  }, h('h2', {}, 'Sign in with an API key'),
  field('API key', input, 'The key is sent once to start a session; the page does not keep it.'),
  h('button', { type: 'submit' }, 'Sign in'), status);
  const federated = (choices.oidc || []).map((p) =>
    h('a', { class: 'button secondary', href: p.login_url }, `Sign in with ${p.display_name}`));
  target.replaceChildren(page('Sign in', failure,
    federated.length ? h('div', { class: 'card' }, h('h2', {}, 'Single sign-on'), ...federated) : null,
    form));
  document.title = 'Sign in · Tollgate';
}

setupChrome();
start();
