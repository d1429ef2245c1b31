// Display modes (ui/request-display-mode): a fullscreen button only where the host lists fullscreen
// among its available modes; <html data-display-mode> follows the mode the host reports.
import { App } from '@modelcontextprotocol/ext-apps';
import { el } from './dom';

function mode(): string {
  return document.documentElement.dataset.displayMode ?? 'inline';
}

/** Record the host's current display mode and relabel the fullscreen buttons. */
export function applyDisplayMode(current: string | undefined): void {
  document.documentElement.dataset.displayMode = current ?? 'inline';
  for (const button of Array.from(document.querySelectorAll<HTMLButtonElement>('button.fullscreen'))) label(button);
}

function label(button: HTMLButtonElement): void {
  const full = mode() === 'fullscreen';
  button.textContent = full ? 'exit fullscreen' : 'fullscreen';
  button.setAttribute('aria-pressed', String(full));
}

/** A button toggling fullscreen, or null when the host offers no fullscreen mode. */
export function fullscreenButton(app: App): HTMLButtonElement | null {
  if (!app.getHostContext()?.availableDisplayModes?.includes('fullscreen')) return null;
  const button = el('button', { cls: 'fullscreen', attrs: { type: 'button', 'data-testid': 'fullscreen' } });
  label(button);
  button.addEventListener('click', () => {
    const wanted = mode() === 'fullscreen' ? 'inline' : 'fullscreen';
    app
      .requestDisplayMode({ mode: wanted })
      .then(result => applyDisplayMode(result.mode))
      .catch((err: Error) => {
        button.title = `the host refused: ${err.message}`;
      });
  });
  return button;
}
