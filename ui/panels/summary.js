// The summary at the top of the page and the problems that concern no one source. Owns: the
// notice of a store moved aside, the headline with its counts, the configuration problems.
// Must not: talk to Berth or keep state; it says only what the snapshot says.

import { el } from '../dom.js';
import { arr, obj, str, num, plural, category, isTool, approvalStep } from '../words.js';
import { renderDiagnostics } from '../problems.js';

export function renderNotices(snap) {
  const notices = [];
  const store = obj(obj(snap.berth).store);
  if (store.moved_aside) {
    notices.push(
      el('div', { className: 'notice notice-warning', testid: 'store-moved-aside' }, [
        el('strong', { text: 'Berth started with a fresh database. ' }),
        'The previous one could not be opened and was kept at ',
        el('span', { className: 'mono', text: store.moved_aside }),
        '. Earlier approvals are not applied.',
      ]),
    );
  }
  return notices.length ? el('div', { className: 'notices' }, notices) : null;
}

export function renderSummary(snap, sources) {
  // The snapshot's `counts` are made from the same sources listed below; they are counted
  // here only for a snapshot that has none.
  const counts = obj(snap.counts);
  const count = (key, pred) => {
    const n = num(counts[key]);
    return n !== null ? n : sources.filter((s) => pred(obj(s))).length;
  };
  const total = count('sources', () => true);
  const pending = count('pending_approval', (s) => s.state === 'pending-approval');
  const activation = count('pending_activation', (s) => s.state === 'pending-activation');
  const active = count('active', (s) => s.state === 'active');
  const failed = count('failed', (s) =>
    s.state === 'load-failed' || s.state === 'paused' || s.state === 'incompatible-version');
  const unsupported = count('unsupported', (s) => s.state === 'unsupported' || s.state === 'policy-limited');
  const disabled = count('disabled', (s) => s.state === 'disabled');
  const preparing = sources.filter((s) => obj(s).state === 'preparing').length;
  const approved = sources.filter((s) => obj(s).state === 'approved').length;
  const limited = sources.filter((s) => arr(obj(s).limited).length > 0).length;

  let headline;
  let tone;
  let detail;
  if (total === 0) {
    headline = 'Nothing waiting for approval';
    tone = 'neutral';
    detail = 'Berth watches OpenCode\'s folders and updates this page as soon as something appears.';
  } else if (pending > 0) {
    headline = pendingHeadline(pending, sources);
    tone = 'attention';
    // An npm plugin's second step follows its first allow: that is not being asked again.
    const askedAgain = sources.filter((s) => obj(s).state === 'pending-approval' &&
      obj(obj(s).approval).decision === 'allow' && !approvalStep(s)).length;
    if (askedAgain === pending) {
      detail = pending === 1
        ? 'It changed since you approved it, so Berth asks again before it runs the new version.'
        : 'They changed since you approved them, so Berth asks again before it runs the new versions.';
    } else if (askedAgain > 0) {
      detail = 'Some changed since you approved them. Review what each one can do before you decide.';
    } else {
      detail = pending === 1
        ? 'None of its code has run. Review what it can do before you approve it.'
        : 'None of their code has run. Review what each one can do before you approve it.';
    }
    if (activation > 0) {
      detail += ' ' + activation + ' changed ' + plural(activation, 'source registers', 'sources register') +
        ' more than the version that was active.';
    }
  } else if (activation > 0) {
    headline = activationHeadline(activation, sources);
    tone = 'attention';
    detail = activation === 1
      ? 'Its new version registers more than the version that was active. OpenCode uses none of the new version until you decide.'
      : 'Their new versions register more than the versions that were active. OpenCode uses none of them until you decide.';
  } else if (failed > 0) {
    const paused = sources.filter((s) => obj(s).state === 'paused').length;
    tone = 'error';
    if (paused > 0 && paused >= failed) {
      headline = paused + ' ' + plural(paused, 'source is', 'sources are') + ' paused';
      detail = 'Their plugin host stopped too often. Look at what went wrong, then resume.';
    } else {
      headline = failed + ' ' + plural(failed, 'source failed', 'sources failed') + ' to load';
      detail = 'Each one below says what went wrong and what to do.' +
        (paused > 0 ? ' ' + paused + ' of them ' + plural(paused, 'is', 'are') + ' paused.' : '');
    }
  } else if (preparing > 0) {
    headline = 'Preparing ' + preparing + ' ' + plural(preparing, 'source', 'sources');
    tone = 'progress';
    detail = 'Berth is downloading what ' + plural(preparing, 'it needs', 'they need') +
      '; this page updates by itself when ' + plural(preparing, 'it is', 'they are') + ' ready.';
  } else if (approved > 0) {
    headline = approved + ' approved ' + plural(approved, 'source', 'sources') + ' not loaded yet';
    tone = 'progress';
    detail = 'Berth loads ' + plural(approved, 'it', 'them') + ' next; this page updates by itself.';
  } else if (active === total) {
    headline = total === 1 ? 'The one source is active' : 'All ' + total + ' sources are active';
    tone = 'ok';
    detail = '';
  } else {
    headline = active + ' of ' + total + ' ' + plural(total, 'source', 'sources') + ' active';
    tone = 'neutral';
    detail = '';
  }
  if (limited > 0 && !detail) {
    detail = limited + ' ' + plural(limited, 'source is', 'sources are') + ' partially limited: the policy keeps some of what ' +
      plural(limited, 'it registers', 'they register') + ' back. Each card says what, and who set it.';
  }

  const chips = [
    chip(total, plural(total, 'source found', 'sources found'), 'total'),
    chip(pending, 'waiting for approval', 'pending', pending > 0 ? 'attention' : ''),
    activation > 0 ? chip(activation, 'waiting for activation', 'pending-activation', 'attention') : null,
    approved > 0 ? chip(approved, 'approved, not loaded yet', 'approved', 'progress') : null,
    chip(active, 'active', 'active', active > 0 ? 'ok' : ''),
    limited > 0 ? chip(limited, 'partially limited', 'limited', 'limited') : null,
    chip(failed, 'failed', 'failed', failed > 0 ? 'error' : ''),
    chip(unsupported, 'not supported', 'unsupported', unsupported > 0 ? 'limited' : ''),
    disabled > 0 ? chip(disabled, 'disabled', 'disabled', '') : null,
  ].filter(Boolean);
  const pure = obj(snap.pure);
  const purePart = str(pure.state) && str(pure.state) !== 'off';
  if (purePart) {
    chips.push(
      el('span', {
        className: 'chip chip-limited',
        testid: 'pure',
        title: 'OPENCODE_PURE' + (pure.raw !== undefined && pure.raw !== null ? '=' + str(pure.raw) : ''),
        text: str(pure.state) === 'on' ? 'Pure mode: external plugins off' : 'Pure mode: ' + str(pure.state),
      }),
    );
  }

  return el('section', { className: 'summary tone-' + tone, testid: 'summary-section' }, [
    el('h1', { className: 'summary-headline', testid: 'summary', text: headline }),
    detail ? el('p', { className: 'summary-detail', text: detail }) : null,
    total > 0 || purePart ? el('div', { className: 'chips', testid: 'counts' }, chips) : null,
  ]);
}

function activationHeadline(n, sources) {
  const waiting = sources.filter((s) => obj(s).state === 'pending-activation');
  const cats = new Set(waiting.map(category));
  const what = waiting.length === n && cats.size === 1 && (cats.has('plugin') || cats.has('tool'))
    ? (cats.has('plugin') ? plural(n, 'plugin', 'plugins') : plural(n, 'tool', 'tools'))
    : plural(n, 'source', 'sources');
  return n + ' changed ' + what + ' ' + plural(n, 'registers', 'register') + ' more than before';
}

function pendingHeadline(pending, sources) {
  const waiting = sources.filter((s) => obj(s).state === 'pending-approval');
  const tools = waiting.filter(isTool).length;
  const plugins = waiting.filter((s) => category(s) === 'plugin').length;
  let what;
  if (waiting.length !== pending || tools + plugins !== pending) what = plural(pending, 'source', 'sources');
  else if (tools === 0) what = plural(plugins, 'plugin', 'plugins');
  else if (plugins === 0) what = plural(tools, 'tool', 'tools');
  else {
    return plugins + ' ' + plural(plugins, 'plugin', 'plugins') + ' and ' + tools + ' ' +
      plural(tools, 'tool', 'tools') + ' waiting for approval';
  }
  return pending + ' ' + what + ' waiting for approval';
}

function chip(n, label, key, tone) {
  return el('span', {
    className: 'chip' + (tone ? ' chip-' + tone : ' chip-quiet'),
    dataset: { count: key },
  }, [el('strong', { text: n }), ' ' + label]);
}

export function renderGlobalDiagnostics(snap) {
  const diags = arr(snap.diagnostics);
  if (!diags.length) return null;
  return el('section', { className: 'panel diagnostics-panel', testid: 'diagnostics' }, [
    el('h2', { className: 'section-title', text: 'Configuration problems' }),
    renderDiagnostics(diags),
  ]);
}
