// Members and their roles: add by e-mail, change a role, remove.

import { op } from '../api.js';
import { h, page, table, errorBox, loading, field, toast, confirmAction } from '../ui.js';
import { scoped, can, state } from '../state.js';

const ROLES = ['owner', 'admin', 'developer', 'viewer'];

export async function render(main) {
  const writable = can('member.write');
  const status = h('div', { 'aria-live': 'polite' });
  const listBox = h('div', {}, loading());
  main.append(page('Members', writable ? addForm(status, () => refresh(listBox, writable)) : null, status,
    h('h2', {}, 'Members'), listBox));
  await refresh(listBox, writable);
}

function addForm(status, after) {
  const email = h('input', { type: 'email', name: 'email', required: true, placeholder: 'someone@example.com' });
  const role = h('select', { name: 'role' }, ROLES.map((r) => h('option', { value: r, selected: r === 'developer' }, r)));
  return h('form', {
    class: 'card',
    onsubmit: async (event) => {
      event.preventDefault();
      status.replaceChildren();
      try {
        const member = await op('members.add', scoped({ email: email.value, role: role.value }));
        toast(`Added ${member.email} as ${member.role}`);
        email.value = '';
        await after();
      } catch (error) {
        status.replaceChildren(errorBox(error));
      }
    },
  }, h('h2', {}, 'Add a member'), field('E-mail of a signed-up user', email), field('Role', role),
  h('button', { type: 'submit' }, 'Add member'));
}

async function refresh(box, writable) {
  try {
    const { members } = await op('members.list', scoped());
    const me = state.session.user_id;
    box.replaceChildren(table([
      { label: 'Name', value: (m) => m.name },
      { label: 'E-mail', value: (m) => m.email },
      {
        label: 'Role',
        value: (m) => (writable ? h('select', {
          'aria-label': `Role of ${m.email}`,
          onchange: async (event) => {
            try {
              await op('members.set-role', scoped({ user_id: m.user_id, role: event.target.value }));
              toast(`${m.email} is now ${event.target.value}`);
            } catch (error) {
              toast(error.message, 'error');
              await refresh(box, writable);
            }
          },
        }, ROLES.map((r) => h('option', { value: r, selected: r === m.role }, r))) : m.role),
      },
      {
        label: 'Actions',
        value: (m) => (writable && m.user_id !== me ? h('button', {
          type: 'button',
          class: 'danger',
          'aria-label': `Remove ${m.email}`,
          onclick: async () => {
            if (!confirmAction(`Remove ${m.email} from this workspace?`)) return;
            try {
              await op('members.remove', scoped({ user_id: m.user_id }));
              await refresh(box, writable);
            } catch (error) {
              toast(error.message, 'error');
            }
          },
        }, 'Remove') : ''),
      },
    ], members, { caption: 'Members' }));
  } catch (error) {
    box.replaceChildren(errorBox(error));
  }
}
