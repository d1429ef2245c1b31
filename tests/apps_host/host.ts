// A minimal MCP Apps host for the browser tests: the official TypeScript client talks to the hub
// (with the token, which only the host holds), the official AppBridge talks to the view in a
// sandboxed iframe, and window.host lets the test drive it. A view opens in a host that declares
// ui/update-model-context or not, and offers fullscreen or not; the host records every context
// update and display-mode request it receives.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { AppBridge, PostMessageTransport, getToolUiResourceUri } from '@modelcontextprotocol/ext-apps/app-bridge';
import type { McpUiDisplayMode, McpUiHostContext } from '@modelcontextprotocol/ext-apps/app-bridge';

const EXT = 'io.modelcontextprotocol/ui';
const MIME = 'text/html;profile=mcp-app';
const info = { name: 'apps-test-host', version: '1.0.0' };
let client: Client;
const problems: string[] = [];
const reads: string[] = [];
// Every ui/update-model-context received: when (ms), whether the host had declared it, what it said.
const contextUpdates: { at: number; declared: boolean; params: unknown }[] = [];
const displayRequests: string[] = [];

interface Offers {
  modelContext?: boolean | 'refuse'; // declare hostCapabilities.updateModelContext (text); "refuse": and answer errors
  displayModes?: string[]; // hostContext.availableDisplayModes
}

window.addEventListener('securitypolicyviolation', e =>
  problems.push(`csp(host): ${e.violatedDirective} ${e.blockedURI}`),
);

async function connect(url: string, token: string, apps = true): Promise<string[]> {
  client = new Client(info, { capabilities: apps ? { extensions: { [EXT]: { mimeTypes: [MIME] } } } : {} });
  const request = client.request.bind(client); // every resources/read a view has the host forward, for the tests
  client.request = ((req: { method: string; params?: { uri?: string } }, ...rest: unknown[]) => {
    if (req.method === 'resources/read') reads.push(String(req.params?.uri));
    return (request as (...a: unknown[]) => unknown)(req, ...rest);
  }) as typeof client.request;
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }),
  );
  return (await client.listTools()).tools.map(t => t.name);
}

async function open(
  tool: string,
  args: Record<string, unknown>,
  offers: Offers = {},
): Promise<Record<string, unknown>> {
  const started = performance.now();
  const listed = (await client.listTools()).tools.find(t => t.name === tool);
  const uri = listed ? getToolUiResourceUri(listed) : undefined;
  if (!uri) throw new Error(`${tool} names no view`);
  const [resource, result] = await Promise.all([
    client.readResource({ uri }),
    client.callTool({ name: tool, arguments: args }),
  ]);
  const item = resource.contents[0] as { mimeType?: string; text?: string };
  if (item.mimeType !== MIME || !item.text) throw new Error(`${uri} is not an app view`);
  const frame = document.createElement('iframe');
  frame.setAttribute('sandbox', 'allow-scripts');
  frame.id = 'view';
  frame.style.cssText = 'width: 100%; height: 640px; border: 1px solid #ccc';
  document.getElementById('stage')!.replaceChildren(frame);
  const declared = !!offers.modelContext;
  const capabilities = {
    serverTools: {},
    serverResources: {},
    openLinks: {},
    logging: {},
    ...(declared ? { updateModelContext: { text: {} } } : {}),
  };
  let context: McpUiHostContext = { theme: 'light', displayMode: 'inline' };
  if (offers.displayModes) context = { ...context, availableDisplayModes: offers.displayModes as McpUiDisplayMode[] };
  const bridge = new AppBridge(client, info, capabilities, { hostContext: context });
  const ready = new Promise<void>(resolve => (bridge.oninitialized = () => resolve()));
  bridge.onsizechange = ({ height }) => {
    if (height && context.displayMode !== 'fullscreen')
      frame.style.height = `${Math.min(Math.max(height, 200), 900)}px`;
  };
  bridge.onupdatemodelcontext = async params => {
    contextUpdates.push({ at: performance.now(), declared, params });
    if (!declared) throw new Error('this host does not take model context');
    if (offers.modelContext === 'refuse') throw new Error('Context update denied');
    return {};
  };
  // As the spec asks: switch only to a mode the host lists and the view declared; answer the mode now in effect.
  bridge.onrequestdisplaymode = async ({ mode }) => {
    displayRequests.push(mode);
    const viewModes = bridge.getAppCapabilities()?.availableDisplayModes ?? [];
    if (offers.displayModes?.includes(mode) && viewModes.includes(mode)) {
      context = { ...context, displayMode: mode };
      frame.style.height = mode === 'fullscreen' ? '860px' : '640px';
      bridge.setHostContext(context);
    }
    return { mode: context.displayMode ?? 'inline' };
  };
  bridge.onloggingmessage = m => problems.push(`view log: ${JSON.stringify(m)}`);
  await bridge.connect(new PostMessageTransport(frame.contentWindow!, frame.contentWindow!));
  frame.srcdoc = item.text;
  await ready;
  await bridge.sendToolInput({ arguments: args });
  await bridge.sendToolResult(result as never);
  return {
    uri,
    openedMs: performance.now() - started,
    structured: (result as { structuredContent?: unknown }).structuredContent ?? null,
  };
}

async function call(tool: string, args: Record<string, unknown>): Promise<unknown> {
  return client.callTool({ name: tool, arguments: args });
}

(window as unknown as { host: unknown }).host = {
  connect,
  open,
  call,
  problems,
  reads,
  contextUpdates,
  displayRequests,
};
