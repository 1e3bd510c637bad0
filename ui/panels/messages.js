// Messages from plugins (client.tui.showToast). Owns: the short-lived toasts (each message once)
// and the list of recent messages. Must not: make a toast modal or show one twice.

import { el } from '../dom.js';
import { arr, obj, str, num, clockText } from '../words.js';
import { sourceLink, pluginName } from '../page.js';

const VARIANTS = {
  info: { label: 'Info', icon: 'i' },
  success: { label: 'Success', icon: '\u2713' },
  warning: { label: 'Warning', icon: '!' },
  error: { label: 'Error', icon: '\u2715' },
};
const variantOf = (n) => (VARIANTS[str(n.variant)] ? str(n.variant) : 'info');
const noticeKey = (n) => str(n.at_ms) + '\u0000' + str(n.plugin) + '\u0000' + str(n.message);

// Notices already turned into toasts (only keys the snapshot still lists are kept: a notice
// the server dropped never comes back).
let shownNotices = new Set();
let noticesSeen = false;
const TOAST_MS = 6000;
// On the first snapshot, only messages this recent become toasts (older ones are in the list).
const TOAST_RECENT_MS = 120000;
const TOASTS_MAX = 4;

export function showNewToasts(snap) {
  const notices = arr(snap.notices).map(obj);
  const now = Date.now();
  const keys = new Set();
  for (const n of notices) {
    const key = noticeKey(n);
    keys.add(key);
    if (shownNotices.has(key)) continue;
    const at = num(n.at_ms);
    if (noticesSeen || (at !== null && Math.abs(now - at) <= TOAST_RECENT_MS)) showToast(n);
  }
  shownNotices = keys;
  noticesSeen = true;
}

function showToast(n) {
  const box = document.getElementById('toasts');
  if (!box) return;
  const variant = variantOf(n);
  const name = pluginName(n.plugin);
  const close = el('button', {
    className: 'toast-close',
    text: '\u00d7',
    testid: 'toast-close',
    attrs: { type: 'button', 'aria-label': 'Dismiss the message from ' + name },
  });
  const toast = el('div', {
    className: 'toast toast-' + variant,
    testid: 'toast',
    dataset: { variant, plugin: str(n.plugin), at: num(n.at_ms) },
  }, [
    el('span', { className: 'toast-icon', text: VARIANTS[variant].icon, attrs: { 'aria-hidden': 'true' } }),
    el('div', { className: 'toast-body' }, [
      el('p', { className: 'toast-from' }, [
        el('span', { className: 'sr-only', text: VARIANTS[variant].label + ' from ' }),
        el('span', { className: 'toast-plugin', testid: 'toast-plugin', title: str(n.plugin), text: name }),
      ]),
      n.title ? el('p', { className: 'toast-title', testid: 'toast-title', text: str(n.title) }) : null,
      el('p', { className: 'toast-message', testid: 'toast-message', text: str(n.message) }),
    ]),
    close,
  ]);
  let timer = null;
  const dismiss = () => {
    clearTimeout(timer);
    const hadFocus = toast.contains(document.activeElement);
    toast.remove();
    if (hadFocus) {
      const next = box.querySelector('.toast-close');
      if (next) next.focus();
    }
  };
  const arm = () => {
    clearTimeout(timer);
    // window.__berthToastMs: a shorter time for the browser tests.
    timer = setTimeout(dismiss, num(window.__berthToastMs) || TOAST_MS);
  };
  close.addEventListener('click', dismiss);
  toast.addEventListener('keydown', (e) => {
    if (e.key === 'Escape') dismiss();
  });
  // Hovering or focusing a toast keeps it (time enough to read); leaving restarts the clock.
  toast.addEventListener('mouseenter', () => clearTimeout(timer));
  toast.addEventListener('mouseleave', () => {
    if (!toast.contains(document.activeElement)) arm();
  });
  toast.addEventListener('focusin', () => clearTimeout(timer));
  toast.addEventListener('focusout', (e) => {
    if (!toast.contains(e.relatedTarget) && !toast.matches(':hover')) arm();
  });
  box.append(toast);
  while (box.children.length > TOASTS_MAX) box.firstElementChild.remove();
  arm();
}

export function renderMessages(snap) {
  const notices = arr(snap.notices).map(obj);
  if (!notices.length) return null;
  const newest = notices.slice().reverse();
  return el('section', { className: 'panel messages-panel', testid: 'plugin-messages' }, [
    el('h2', { className: 'section-title' }, [
      'Plugin messages',
      el('span', { className: 'section-count', text: notices.length }),
      el('span', { className: 'section-note', text: 'newest first' }),
    ]),
    el('ol', { className: 'messages' }, newest.map((n, i) => {
      const variant = variantOf(n);
      return el('li', {
        className: 'message message-' + variant,
        testid: 'plugin-message',
        dataset: { variant, plugin: str(n.plugin) },
      }, [
        el('span', { className: 'message-variant', text: VARIANTS[variant].label }),
        el('span', { className: 'message-when' }, num(n.at_ms) !== null
          ? el('time', { text: clockText(n.at_ms), attrs: { datetime: new Date(num(n.at_ms)).toISOString() } })
          : null),
        el('span', { className: 'message-from' }, sourceLink(n.plugin, {
          testid: 'message-plugin',
          focusGlobal: 'message:' + i + ':' + str(n.plugin),
        })),
        el('span', { className: 'message-text' }, [
          n.title ? el('strong', { text: str(n.title) + ' ' }) : null,
          str(n.message),
        ]),
      ]);
    })),
  ]);
}
