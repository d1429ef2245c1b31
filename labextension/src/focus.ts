/**
 * Tell the server extension which notebook the user looks at: its kernel becomes the one that bare
 * MCP URIs (nb://vars/df) address at {base_url}mcp-notebook/mcp and through `mcp-notebook bridge`.
 * Best effort: a server without the extension (404) or a notebook without a kernel is left alone.
 */
import { NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';

let lastReported: string | null = null;

export async function reportFocus(panel: NotebookPanel | null): Promise<void> {
  const kernelId = panel?.sessionContext.session?.kernel?.id ?? null;
  if (!kernelId || kernelId === lastReported) {
    return;
  }
  lastReported = kernelId;
  const settings = ServerConnection.makeSettings();
  const base = settings.baseUrl.endsWith('/') ? settings.baseUrl : settings.baseUrl + '/';
  const url = base + 'mcp-notebook/focus';
  try {
    await ServerConnection.makeRequest(
      url,
      { method: 'POST', body: JSON.stringify({ kernel_id: kernelId }) },
      settings,
    );
  } catch {
    lastReported = null; // try again at the next focus change
  }
}
