// Building the page's elements. Owns: `el` (every value goes in as text or as an attribute,
// never as HTML), <details> that stay opened or closed across re-renders, table headers.
// Must not: know the snapshot, Berth, or any panel.

/** Creates an element. `props`: className, text, testid, title, dataset, attrs, hidden. */
export function el(tag, props, children) {
  const node = document.createElement(tag);
  if (props) {
    if (props.className) node.className = props.className;
    if (props.text !== undefined && props.text !== null) node.textContent = String(props.text);
    if (props.testid) node.setAttribute('data-testid', props.testid);
    if (props.title) node.title = String(props.title);
    if (props.dataset) {
      for (const [k, v] of Object.entries(props.dataset)) {
        if (v !== undefined && v !== null) node.dataset[k] = String(v);
      }
    }
    if (props.attrs) {
      for (const [k, v] of Object.entries(props.attrs)) {
        if (v !== undefined && v !== null) node.setAttribute(k, String(v));
      }
    }
  }
  appendAll(node, children);
  return node;
}

function appendAll(node, children) {
  if (children === undefined || children === null) return node;
  for (const child of Array.isArray(children) ? children : [children]) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const openState = Object.create(null); // <details> the person opened or closed, by key

export function details(key, defaultOpen, summaryChildren, bodyChildren, props) {
  const d = el('details', props);
  d.open = key in openState ? openState[key] : defaultOpen;
  d.addEventListener('toggle', () => {
    openState[key] = d.open;
  });
  d.append(el('summary', null, summaryChildren));
  appendAll(d, bodyChildren);
  return d;
}

/** A column header of the page's tables. */
export const th = (text, cls) => el('th', { className: cls, text, attrs: { scope: 'col' } });
