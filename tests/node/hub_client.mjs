// The official TypeScript SDK client against the JupyterHub service, knowing only its URL:
// discovery, Dynamic Client Registration, PKCE, the token, and a refresh once the access token
// expired. The browser is the test's: this prints {"authorize": URL} and reads the code on stdin.
//   node hub_client.mjs MCP_URL REDIRECT_URI SLEEP_MS URI...
import readline from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [url, redirect, sleepMs, ...uris] = process.argv.slice(2);
const stdin = readline.createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const say = (value) => process.stdout.write(JSON.stringify(value) + "\n");
const saved = { client: undefined, tokens: undefined, verifier: undefined, history: [] };

const provider = {
  get redirectUrl() {
    return redirect;
  },
  get clientMetadata() {
    return {
      client_name: "TypeScript assistant",
      redirect_uris: [redirect],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  clientInformation: () => saved.client,
  saveClientInformation: (info) => {
    saved.client = info;
  },
  tokens: () => saved.tokens,
  saveTokens: (tokens) => {
    saved.tokens = tokens;
    saved.history.push(tokens);
  },
  redirectToAuthorization: (authorizationUrl) => say({ authorize: authorizationUrl.toString() }),
  saveCodeVerifier: (verifier) => {
    saved.verifier = verifier;
  },
  codeVerifier: () => saved.verifier,
};

async function connect() {
  const client = new Client({ name: "mcp-notebook-hub-test", version: "0.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  try {
    await client.connect(transport);
    return client;
  } catch (error) {
    if (!(error instanceof UnauthorizedError)) throw error;
  }
  const { value } = await stdin.next(); // the code, from the test's browser
  await transport.finishAuth(value.trim());
  const signedIn = new Client({ name: "mcp-notebook-hub-test", version: "0.0.0" });
  await signedIn.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: provider }));
  return signedIn;
}

const client = await connect();
const reads = {};
for (const uri of uris) reads[uri] = (await client.readResource({ uri })).contents[0].text;
await new Promise((resolve) => setTimeout(resolve, Number(sleepMs)));
const after = (await client.readResource({ uri: uris[0] })).contents[0].text;
const first = saved.history[0];
const last = saved.history[saved.history.length - 1];
say({
  reads,
  after,
  client_id: saved.client?.client_id,
  tokens: saved.history.length,
  rotated: first.refresh_token !== last.refresh_token,
});
await client.close();
process.exit(0);
