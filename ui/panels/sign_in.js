// A remote MCP server's sign-in (OpenCode's `oauth`). Owns: the "Sign-in" block of its card —
// whether Berth holds a sign-in for the server, "Sign in" (the provider's page opens in the
// browser; its link is shown in case none opened), the wait for the person to finish there,
// how the last attempt ended, and "Sign out". Must not: see a token (Berth keeps it in the OS
// keyring and never sends it to the page), or show the server as signed in before the
// snapshot says so.

import { el } from '../dom.js';
import { obj, str } from '../words.js';
import { rerender } from '../page.js';
import { errorBox } from '../problems.js';
import { sendSignIn, describeError } from '../transport.js';

// What this page sent, per source: { action, phase: 'sending' | 'error', error }.
const sent = new Map();

/** The card's "Sign-in" block (nothing for a source that does not sign in). */
export function renderSignIn(s) {
  if (!s.sign_in) return null;
  const id = str(s.id);
  const si = obj(s.sign_in);
  const entry = sent.get(id);
  const busy = !!entry && entry.phase === 'sending';
  const waiting = str(si.waiting_at);
  const button = (action, label, tone) => {
    const b = el('button', {
      className: 'btn btn-small ' + tone,
      testid: action,
      text: busy && entry.action === action ? (action === 'sign-in' ? 'Opening\u2026' : 'Signing out\u2026') : label,
      dataset: { action },
      attrs: { type: 'button', 'aria-label': label + ' (' + str(si.host) + ')' },
    });
    b.disabled = busy;
    b.addEventListener('click', () => send(id, action));
    return b;
  };
  let body;
  if (waiting) {
    body = el('div', { testid: 'sign-in-waiting' }, [
      el('p', null, [
        'Waiting for you to finish signing in to ',
        el('strong', { className: 'mono', text: str(si.host) }),
        ' in your browser. If no browser page opened, ',
        // Berth only opens http(s) pages; the check here keeps any other scheme out of a link.
        /^https?:\/\//.test(waiting)
          ? el('a', { testid: 'sign-in-link', attrs: { href: waiting, target: '_blank', rel: 'noopener noreferrer' }, text: 'open the sign-in page' })
          : el('span', { className: 'mono', text: waiting }),
        '.',
      ]),
    ]);
  } else if (si.signed_in) {
    body = el('div', { testid: 'signed-in' }, [
      el('p', null, [
        'Signed in to ',
        el('strong', { className: 'mono', text: str(si.host) }),
        el('span', { className: 'muted', text: '; the token is in your OS keyring and is sent only to this server.' }),
      ]),
      el('div', { className: 'update-actions' }, [button('sign-out', 'Sign out', '')]),
    ]);
  } else {
    body = el('div', { testid: 'not-signed-in' }, [
      el('p', null, [
        el('strong', { className: 'mono', text: str(si.host) }),
        ' may ask you to sign in. Berth opens its sign-in page in your browser and keeps the token in your OS keyring.',
      ]),
      el('div', { className: 'update-actions' }, [button('sign-in', 'Sign in', 'btn-allow')]),
    ]);
  }
  const failed = entry && entry.phase === 'error' ? entry.error : si.failed ? describeError(si.failed) : null;
  return el('section', { className: 'versions', testid: 'sign-in-block', dataset: { sourceId: id, signedIn: String(!!si.signed_in) } }, [
    el('h3', { className: 'caps-title', text: 'Sign-in' }),
    body,
    failed && !waiting ? errorBox(failed, 'The sign-in did not complete: ', 'sign-in-error') : null,
  ]);
}

function send(id, action) {
  const entry = { action, phase: 'sending', error: null };
  sent.set(id, entry);
  rerender();
  let p;
  try {
    p = Promise.resolve(sendSignIn(action, id));
  } catch (err) {
    p = Promise.reject(err);
  }
  p.then(() => {
    // The snapshot shows what became of it (waiting, signed in, signed out).
    if (sent.get(id) === entry) sent.delete(id);
    rerender();
  }, (err) => {
    if (sent.get(id) !== entry) return;
    entry.phase = 'error';
    entry.error = describeError(err);
    rerender();
  });
}
