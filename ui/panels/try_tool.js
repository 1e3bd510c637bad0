// "Try it" on a tool: a form made from the tool's JSON Schema, a Run button that makes a real
// call through Berth's full path (hooks, permission prompts, a receipt) and Cancel while it runs,
// then the receipt as Berth stored it. Owns: the form's fields and values per tool (kept across
// re-renders), the call this page started per tool, and its receipt. Must not: check the
// arguments against the schema itself (Berth and the tool do, and say so), or call anything but
// the tool the form belongs to.

import { el, details } from '../dom.js';
import { arr, obj, str } from '../words.js';
import { rerender } from '../page.js';
import { errorBox } from '../problems.js';
import { sendInvoke, sendCancel, describeError } from '../transport.js';

// Per tool name: { values: {field: text|bool}, raw: bool, rawText, call: {id, phase, receipt, error} }.
const forms = new Map();

function formOf(name) {
  if (!forms.has(name)) forms.set(name, { values: {}, raw: false, rawText: '{}', call: null });
  return forms.get(name);
}

/**
 * How one property is entered: 'text', 'number', 'integer', 'boolean', 'enum', 'list' (an array
 * of strings or numbers, one item per line) or 'json' (anything else: objects, unions, arrays of
 * objects — typed as JSON).
 */
export function fieldKind(schema) {
  const s = obj(schema);
  const types = arr(s.type).length ? arr(s.type).map(str) : [str(s.type)];
  const nonNull = types.filter((t) => t && t !== 'null');
  if (arr(s.enum).length && arr(s.enum).every((v) => typeof v === 'string')) return 'enum';
  if (s.anyOf || s.oneOf || s.allOf || nonNull.length > 1) {
    // A union of string literals (zod's enums) is still a choice.
    const alts = arr(s.anyOf || s.oneOf).map(obj);
    if (alts.length && alts.every((a) => typeof a.const === 'string')) return 'enum';
    return 'json';
  }
  const t = nonNull[0] || '';
  if (t === 'string') return 'text';
  if (t === 'number') return 'number';
  if (t === 'integer') return 'integer';
  if (t === 'boolean') return 'boolean';
  if (t === 'array') {
    const item = obj(s.items);
    return ['string', 'number', 'integer'].includes(str(item.type)) && !item.enum ? 'list' : 'json';
  }
  return 'json';
}

function choices(schema) {
  const s = obj(schema);
  if (arr(s.enum).length) return arr(s.enum).map(str);
  return arr(s.anyOf || s.oneOf).map((a) => str(obj(a).const));
}

/**
 * The arguments the form's values make: { args } or { error } naming the field that cannot be
 * read. Empty optional fields are left out; an empty required one is sent empty (the tool says
 * what it wants).
 */
export function argsOf(schema, form) {
  if (form.raw || !propsOf(schema)) {
    try {
      const v = JSON.parse(form.rawText || '{}');
      if (!v || typeof v !== 'object' || Array.isArray(v)) return { error: 'The arguments must be a JSON object.' };
      return { args: v };
    } catch (e) {
      return { error: 'The arguments are not JSON: ' + e.message };
    }
  }
  const props = propsOf(schema);
  const required = new Set(arr(obj(schema).required).map(str));
  const args = {};
  for (const [field, sub] of Object.entries(props)) {
    const kind = fieldKind(sub);
    const v = form.values[field];
    if (kind === 'boolean') {
      if (v !== undefined) args[field] = !!v;
      continue;
    }
    const text = v === undefined ? '' : String(v);
    if (text === '' && !required.has(field)) continue;
    if (kind === 'text' || kind === 'enum') {
      args[field] = text;
    } else if (kind === 'number' || kind === 'integer') {
      const n = Number(text);
      if (text === '' || !Number.isFinite(n)) return { error: field + ' must be a number.' };
      args[field] = n;
    } else if (kind === 'list') {
      const numeric = ['number', 'integer'].includes(str(obj(obj(sub).items).type));
      const items = text.split('\n').map((x) => x.trim()).filter((x) => x !== '');
      if (numeric && items.some((x) => !Number.isFinite(Number(x)))) return { error: field + ' must hold one number per line.' };
      args[field] = numeric ? items.map(Number) : items;
    } else {
      try {
        args[field] = JSON.parse(text);
      } catch (e) {
        return { error: field + ' is not JSON: ' + e.message };
      }
    }
  }
  return { args };
}

function propsOf(schema) {
  const p = obj(schema).properties;
  return p && typeof p === 'object' && Object.keys(p).length ? p : null;
}

/** The "Try it" block of tool `t` (a details element, folded until opened). */
export function renderTry(t) {
  const name = str(t.name);
  const schema = t.parameters === undefined ? {} : t.parameters;
  const form = formOf(name);
  const key = 'try:' + name;
  const props = propsOf(schema);
  const required = new Set(arr(obj(schema).required).map(str));
  const running = !!form.call && form.call.phase === 'running';

  const fields = props && !form.raw
    ? Object.entries(props).map(([field, sub]) => renderField(name, form, field, sub, required.has(field), running))
    : [el('label', { className: 'try-field' }, [
      el('span', { className: 'try-label', text: 'Arguments (JSON)' }),
      textarea(key + ':raw', form.rawText, running, (v) => { form.rawText = v; }, 'try-raw', 6),
    ])];
  const rawToggle = props
    ? el('label', { className: 'try-raw-toggle muted' }, [
      checkbox(key + ':raw-toggle', form.raw, running, (v) => {
        // Switching to raw JSON starts from what the form holds.
        if (v) {
          const made = argsOf(schema, Object.assign({}, form, { raw: false }));
          form.rawText = JSON.stringify(made.args || {}, null, 2);
        }
        form.raw = v;
        rerender();
      }, 'try-raw-mode'),
      ' Edit as JSON',
    ])
    : null;

  const run = el('button', {
    className: 'btn btn-small btn-primary',
    testid: 'try-run',
    dataset: { focusGlobal: key + ':run' },
    text: running ? 'Running\u2026' : 'Run',
    attrs: { type: 'submit' },
  });
  run.disabled = running || !sendInvoke;
  const cancel = running
    ? el('button', { className: 'btn btn-small', testid: 'try-cancel', dataset: { focusGlobal: key + ':cancel' }, text: 'Cancel', attrs: { type: 'button' } })
    : null;
  if (cancel) cancel.addEventListener('click', () => sendCancel && sendCancel(form.call.id));

  const f = el('form', { className: 'try-form', testid: 'try-form' }, [
    ...fields,
    rawToggle,
    el('div', { className: 'update-actions' }, [run, cancel]),
    form.call && form.call.phase === 'invalid' ? errorBox({ code: 'invalid-arguments', message: form.call.error, recovery: 'fix the field and run again' }, 'Not sent: ', 'try-invalid') : null,
    form.call && form.call.phase === 'error' ? errorBox(form.call.error, 'The call did not run: ', 'try-error') : null,
    form.call && form.call.receipt ? renderReceipt(form.call.receipt) : null,
  ]);
  f.addEventListener('submit', (e) => {
    e.preventDefault();
    start(name, schema, form);
  });
  const block = details(key, false,
    [
      el('span', { className: 'details-title', text: 'Try it' }),
      el('span', { className: 'details-note', text: 'a real call, with its receipt' }),
    ],
    f,
    { className: 'tool-try', testid: 'tool-try' });
  block.querySelector('summary').dataset.focusGlobal = key;
  return block;
}

function renderField(tool, form, field, sub, isRequired, disabled) {
  const kind = fieldKind(sub);
  const key = 'try:' + tool + ':' + field;
  const v = form.values[field];
  const set = (x) => { form.values[field] = x; };
  let input;
  if (kind === 'boolean') {
    input = checkbox(key, !!v, disabled, set, 'try-input');
  } else if (kind === 'enum') {
    input = el('select', { className: 'policy-select', testid: 'try-input', dataset: { focusGlobal: key, field } },
      [el('option', { text: isRequired ? 'choose\u2026' : '(leave out)' }), ...choices(sub).map((c) => el('option', { text: c }))]
        .map((o, i) => { o.value = i === 0 ? '' : o.textContent; o.selected = (v || '') === o.value; return o; }));
    input.disabled = disabled;
    input.addEventListener('change', () => set(input.value));
  } else if (kind === 'list' || kind === 'json') {
    input = textarea(key, v === undefined ? '' : String(v), disabled, set, 'try-input', kind === 'json' ? 3 : 2);
    input.dataset.field = field;
  } else {
    input = el('input', {
      className: 'try-input',
      testid: 'try-input',
      dataset: { focusGlobal: key, field },
      attrs: { type: kind === 'text' ? 'text' : 'number', step: kind === 'integer' ? '1' : 'any' },
    });
    input.value = v === undefined ? '' : String(v);
    input.disabled = disabled;
    input.addEventListener('input', () => set(input.value));
  }
  const hint = { list: 'one per line', json: 'JSON' }[kind];
  return el('label', { className: 'try-field', dataset: { field, kind } }, [
    el('span', { className: 'try-label' }, [
      el('span', { className: 'mono', text: field }),
      isRequired ? el('span', { className: 'try-required', text: ' required' }) : null,
      hint ? el('span', { className: 'muted', text: ' (' + hint + ')' }) : null,
    ]),
    input,
    str(obj(sub).description) ? el('span', { className: 'try-help muted', text: str(obj(sub).description) }) : null,
  ]);
}

function textarea(key, value, disabled, set, testid, rows) {
  const t = el('textarea', { className: 'try-input mono', testid, dataset: { focusGlobal: key }, attrs: { rows: String(rows), spellcheck: 'false' } });
  t.value = value;
  t.disabled = disabled;
  t.addEventListener('input', () => set(t.value));
  return t;
}

function checkbox(key, checked, disabled, set, testid) {
  const c = el('input', { testid, dataset: { focusGlobal: key }, attrs: { type: 'checkbox' } });
  c.checked = checked;
  c.disabled = disabled;
  c.addEventListener('change', () => set(c.checked));
  return c;
}

function renderReceipt(r) {
  const receipt = obj(r);
  const error = obj(receipt.error);
  return el('div', { className: 'try-receipt', testid: 'try-receipt', dataset: { status: str(receipt.status), receiptId: str(receipt.receipt_id) } }, [
    el('p', null, [
      el('strong', { testid: 'try-status', text: str(receipt.status) }),
      el('span', { className: 'muted', text: ' \u00b7 receipt ' }),
      el('span', { className: 'mono', testid: 'try-receipt-id', text: str(receipt.receipt_id) }),
      arr(receipt.transformed_by).length ? el('span', { className: 'muted', text: ' \u00b7 changed by the hooks of ' + arr(receipt.transformed_by).map(str).join(', ') }) : null,
    ]),
    error.code ? el('p', { className: 'diag-message', testid: 'try-receipt-error' }, [el('span', { className: 'diag-code', text: str(error.code) }), ' ' + str(error.message)]) : null,
    receipt.title ? el('p', { className: 'muted', text: str(receipt.title) }) : null,
    receipt.output !== undefined && receipt.output !== null
      ? el('pre', { className: 'schema try-output', testid: 'try-output', text: str(receipt.output) })
      : null,
  ]);
}

let calls = 0;

function start(name, schema, form) {
  const made = argsOf(schema, form);
  if (made.error) {
    form.call = { id: null, phase: 'invalid', error: made.error, receipt: null };
    rerender();
    return;
  }
  calls += 1;
  const call = { id: 'page-' + Date.now().toString(36) + '-' + calls, phase: 'running', receipt: null, error: null };
  form.call = call;
  rerender();
  let p;
  try {
    p = Promise.resolve(sendInvoke(name, made.args, call.id));
  } catch (err) {
    p = Promise.reject(err);
  }
  p.then((receipt) => {
    if (form.call !== call) return;
    call.phase = 'done';
    call.receipt = receipt;
    rerender();
  }, (err) => {
    if (form.call !== call) return;
    call.phase = 'error';
    call.error = describeError(err);
    rerender();
  });
}
