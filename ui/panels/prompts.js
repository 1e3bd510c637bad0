// Permission prompts (a running tool waits on `ctx.ask`) and the standing answers. Owns: the
// prompts panel, the answers this page sent until a snapshot no longer lists their prompt, and
// the way from the header's badge to the first prompt. Must not: remove a prompt itself.

import { el } from '../dom.js';
import { arr, obj, str, num, plural, clockText } from '../words.js';
import { rerender, sourceLink, pluginName } from '../page.js';
import { focusGlobal } from '../focus.js';
import { errorBox } from '../problems.js';
import { sendPromptAnswer, describeError } from '../transport.js';

// Answers sent from this page to permission prompts, by prompt id: { reply, phase: 'sending' |
// 'sent' | 'error', error }. Settled (removed) once the snapshot no longer lists the prompt.
const answers = Object.create(null);

const LEVELS = { allow: 'allow', ask: 'ask', deny: 'deny' };
const level = (v) => LEVELS[str(v)] || str(v) || 'ask';

/** The person's standing answers, each said to be for one plugin or for every plugin. */
export function renderStandingAnswers(snap) {
  const rules = arr(snap.standing_answers).map(obj);
  if (!rules.length) return null;
  return el('section', { className: 'panel standing-panel', testid: 'standing-answers' }, [
    el('h2', { className: 'section-title' }, [
      'Standing answers',
      el('span', { className: 'section-count', text: rules.length }),
    ]),
    el('p', { className: 'section-intro', text: 'Permissions answered for good. An answer given to one plugin ("Always") answers only that plugin; change them with berth permissions.' }),
    el('ul', { className: 'standing-items' }, rules.map((r) => el('li', { testid: 'standing-answer', dataset: { source: str(r.source_id) } }, [
      el('span', { className: 'mono', text: str(r.permission) + ' ' + str(r.pattern) }),
      ' → ',
      el('strong', { text: str(r.action) === 'allow' ? 'always allowed' : 'always refused' }),
      ' for ',
      str(r.source_id) === '*' ? el('span', { text: 'every plugin' }) : sourceLink(str(r.source_id), { testid: 'standing-source' }),
    ]))),
  ]);
}

export function renderPrompts(snap) {
  const prompts = arr(snap.prompts).map(obj);
  if (!prompts.length) return null;
  return el('section', {
    className: 'panel prompts-panel',
    testid: 'prompts',
    attrs: { id: 'prompts', tabindex: '-1', 'aria-labelledby': 'prompts-title' },
  }, [
    el('h2', { className: 'section-title', attrs: { id: 'prompts-title' } }, [
      'Permission requests',
      el('span', { className: 'section-count', text: prompts.length }),
      el('span', { className: 'section-note', text: 'a tool is waiting for your answer' }),
    ]),
    el('p', {
      className: 'section-intro',
      text: plural(prompts.length, 'This call is', 'These calls are') +
        ' paused until you answer or ' + plural(prompts.length, 'its', 'their') +
        ' time runs out. Everything else keeps working meanwhile.',
    }),
    el('ul', { className: 'prompt-items' }, prompts.map(renderPrompt)),
  ]);
}

function renderPrompt(p) {
  const id = str(p.id);
  const tool = str(p.tool);
  const permission = str(p.permission) || 'a permission';
  const patterns = arr(p.patterns).map(str);
  const always = arr(p.always).map(str);
  const sameAlways = always.length === patterns.length && always.every((a, i) => a === patterns[i]);
  const answer = answers[id];
  const busy = !!answer && answer.phase !== 'error';
  const name = pluginName(p.plugin);
  const key = 'prompt:' + id;

  const btn = (reply, label, cls, aria) => {
    const b = el('button', {
      className: 'btn ' + cls,
      text: label,
      dataset: { reply, focusGlobal: key + ':' + reply },
      attrs: { type: 'button', 'aria-label': aria },
    });
    b.disabled = busy;
    b.addEventListener('click', () => answerPrompt(p, reply));
    return b;
  };
  const what = tool + ' (' + permission + (patterns.length ? ': ' + patterns.join(', ') : '') + ')';

  return el('li', {
    className: 'prompt',
    testid: 'prompt',
    dataset: { promptId: id, permission, tool, plugin: str(p.plugin) },
    attrs: { 'aria-label': str(p.title) || what, 'aria-busy': busy ? 'true' : null },
  }, [
    el('h3', { className: 'prompt-title', testid: 'prompt-heading' }, [
      el('span', { className: 'prompt-icon', text: '?', attrs: { 'aria-hidden': 'true' } }),
      el('span', null, [
        'The tool ',
        el('span', { className: 'mono prompt-tool', testid: 'prompt-tool', text: tool || 'unknown' }),
        ' from ',
        sourceLink(p.plugin, { testid: 'prompt-plugin', focusGlobal: key + ':plugin' }),
        ' asks for the ',
        el('strong', { className: 'prompt-permission', testid: 'prompt-permission', text: permission }),
        ' permission',
      ]),
    ]),
    el('dl', { className: 'prompt-facts' }, [
      el('dt', { text: patterns.length === 1 ? 'On' : 'On these' }),
      el('dd', null, patterns.length
        ? el('ul', { className: 'prompt-patterns', testid: 'prompt-patterns' },
          patterns.map((x) => el('li', { className: 'mono', text: x })))
        : el('span', { className: 'muted', testid: 'prompt-patterns', text: 'nothing named' })),
      always.length && !sameAlways ? el('dt', { text: '\u201cAlways\u201d covers' }) : null,
      always.length && !sameAlways
        ? el('dd', null, el('ul', { className: 'prompt-patterns', testid: 'prompt-always' },
          always.map((x) => el('li', { className: 'mono', text: x }))))
        : null,
      el('dt', { text: 'Why you' }),
      el('dd', { testid: 'prompt-answers' }, [
        'The plugin answered ',
        el('strong', { className: 'level level-' + level(p.plugin_answer), testid: 'prompt-plugin-answer', text: level(p.plugin_answer) }),
        '; your cap is ',
        el('strong', { className: 'level level-' + level(p.cap), testid: 'prompt-cap', text: level(p.cap) }),
        '.',
        el('span', { className: 'muted', text: ' ' + whyAsked(level(p.plugin_answer), level(p.cap)) }),
      ]),
      num(p.asked_at_ms) !== null ? el('dt', { text: 'Asked' }) : null,
      num(p.asked_at_ms) !== null
        ? el('dd', null, [
          el('time', { text: clockText(p.asked_at_ms), attrs: { datetime: new Date(num(p.asked_at_ms)).toISOString() } }),
          p.call_id ? el('span', { className: 'muted', text: ' \u00b7 call ' }) : null,
          p.call_id ? el('span', { className: 'mono muted', testid: 'prompt-call', text: str(p.call_id) }) : null,
        ])
        : null,
    ]),
    el('div', { className: 'prompt-actions' }, [
      btn('once', 'Allow once', 'btn-allow', 'Allow ' + what + ' once'),
      btn('always', 'Always allow', 'btn-always',
        'Always allow ' + tool + ' to use ' + permission + (always.length ? ' on ' + always.join(', ') : '')),
      btn('reject', 'Reject', 'btn-deny', 'Reject ' + what),
      answerStatus(id, key),
    ]),
    answerError(id),
  ]);
}

function whyAsked(pluginAnswer, cap) {
  if (cap === 'ask' && pluginAnswer === 'allow') return 'Your cap has the last word, so Berth asks you.';
  if (pluginAnswer === 'ask') return 'Nothing allowed it on its own, so Berth asks you.';
  return 'So Berth asks you.';
}

const REPLY_PROGRESS = { once: 'Allowing once\u2026', always: 'Allowing always\u2026', reject: 'Rejecting\u2026' };
const REPLY_FAILED = { once: 'Could not allow it: ', always: 'Could not allow it: ', reject: 'Could not reject it: ' };

function answerStatus(id, key) {
  const a = answers[id];
  if (!a || a.phase === 'error') return null;
  return el('span', {
    className: 'progress',
    testid: 'prompt-progress',
    dataset: { phase: a.phase, focusGlobal: key + ':status' },
    attrs: { role: 'status', tabindex: '-1' },
  }, [
    el('span', { className: 'spinner', attrs: { 'aria-hidden': 'true' } }),
    a.phase === 'sending' ? REPLY_PROGRESS[a.reply] : 'Answered. Updating\u2026',
  ]);
}

function answerError(id) {
  const a = answers[id];
  if (!a || a.phase !== 'error') return null;
  return errorBox(a.error, REPLY_FAILED[a.reply] || 'Could not answer: ', 'prompt-error');
}

function answerPrompt(p, reply) {
  const id = str(p.id);
  const old = answers[id];
  if (!sendPromptAnswer || (old && old.phase !== 'error')) return;
  const entry = { reply, phase: 'sending', error: null, timer: null };
  answers[id] = entry;
  rerender();
  focusGlobal('prompt:' + id + ':status');
  let sent;
  try {
    sent = Promise.resolve(sendPromptAnswer(id, reply));
  } catch (err) {
    sent = Promise.reject(err);
  }
  sent.then(() => {
    if (answers[id] !== entry) return;
    entry.phase = 'sent';
    // The prompt leaves with the live event (it may already have); if none comes, stop
    // showing progress after a while and show whatever Berth last said.
    entry.timer = setTimeout(() => {
      if (answers[id] === entry) {
        delete answers[id];
        rerender();
      }
    }, 10000);
    rerender();
  }, (err) => {
    if (answers[id] !== entry) return;
    entry.phase = 'error';
    entry.error = describeError(err);
    rerender();
    focusGlobal('prompt:' + id + ':' + reply);
  });
}

/** Drops answers to prompts the snapshot no longer lists. */
export function settleAnswers(prompts) {
  const open = new Set(prompts.map((p) => str(obj(p).id)));
  for (const id of Object.keys(answers)) {
    if (answers[id].phase === 'sending' || open.has(id)) continue;
    clearTimeout(answers[id].timer);
    delete answers[id];
  }
}

/** The header's permission badge: goes to the first prompt's "Allow once". */
export function showPrompts() {
  const panel = document.querySelector('[data-testid=prompts]');
  if (!panel) return;
  panel.scrollIntoView({ block: 'start' });
  const first = panel.querySelector('button[data-reply]:not([disabled])');
  (first || panel).focus({ preventScroll: true });
}
