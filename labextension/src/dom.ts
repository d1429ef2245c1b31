/** A tiny DOM builder: text always goes through textContent, never innerHTML (kernel and client data are untrusted). */
export type Child = Node | string | null | undefined | false;

export function h(tag: string, attrs: Record<string, string> = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === 'class') {
      el.className = value;
    } else {
      el.setAttribute(key, value);
    }
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    el.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return el;
}

export function button(label: string, cls: string, onClick: () => void, title = ''): HTMLButtonElement {
  const el = h('button', { class: `jp-Button mcp-nb-button ${cls}`, type: 'button', title }) as HTMLButtonElement;
  el.textContent = label;
  el.addEventListener('click', onClick);
  return el;
}
