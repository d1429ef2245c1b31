// Node preload (`node --import <this file> ...`): send `Authorization: Bearer $MCP_BEARER` on every
// HTTP request the MCP conformance suite makes, so it can test a token-protected hub. The suite has
// no option for extra headers.
//
// Three paths need it:
//  * globalThis.fetch, used by the SDK client transport and by the suite's raw probes;
//  * undici's `request()`, used by the dns-rebinding-protection scenario. It goes through undici's
//    process-wide global dispatcher, so we compose that dispatcher with a header-adding interceptor,
//    loading the same undici copy the suite itself imports (resolved from the script being run);
//  * node:http `request()`, used by the (alpha) http-header-validation scenarios.
// Only requests to loopback hosts get the header; the token never leaves the machine.
import { realpathSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";

const token = process.env.MCP_BEARER ?? "";
const LOOPBACK = new Set(["127.0.0.1", "localhost", "[::1]"]);

function isLoopback(url) {
  try {
    return LOOPBACK.has(new URL(String(url)).hostname);
  } catch {
    return false;
  }
}

function hasAuthorization(headers) {
  if (!headers) return false;
  if (Array.isArray(headers)) {
    // undici accepts a flat [name, value, ...] list or a list of [name, value] pairs.
    return headers.some((item, i) =>
      Array.isArray(item) ? String(item[0]).toLowerCase() === "authorization"
        : i % 2 === 0 && String(item).toLowerCase() === "authorization");
  }
  if (typeof headers.has === "function") return headers.has("authorization");
  return Object.keys(headers).some((name) => name.toLowerCase() === "authorization");
}

function withAuthorization(headers) {
  const value = `Bearer ${token}`;
  if (!headers) return { authorization: value };
  if (Array.isArray(headers)) {
    return Array.isArray(headers[0]) ? [...headers, ["authorization", value]] : [...headers, "authorization", value];
  }
  if (typeof headers.entries === "function" && typeof headers.has === "function") {
    const copy = new Headers(headers);
    copy.set("authorization", value);
    return copy;
  }
  return { ...headers, authorization: value };
}

if (token) {
  const originalFetch = globalThis.fetch;
  globalThis.fetch = function fetchWithBearer(input, init = {}) {
    const url = input instanceof Request ? input.url : input;
    if (!isLoopback(url)) return originalFetch(input, init);
    const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
    if (!headers.has("authorization")) headers.set("authorization", `Bearer ${token}`);
    return originalFetch(input, { ...init, headers });
  };

  const originalRequest = http.request;
  http.request = function requestWithBearer(...args) {
    const options = args.find((a) => a && typeof a === "object" && !(a instanceof URL));
    const target = typeof args[0] === "string" || args[0] instanceof URL ? String(args[0])
      : `http://${options?.hostname ?? options?.host ?? "localhost"}`;
    const host = options?.hostname ?? options?.host;
    const loopback = host ? LOOPBACK.has(host.startsWith("::") ? `[${host}]` : host) : isLoopback(target);
    if (loopback && !hasAuthorization(options?.headers)) {
      if (options) {
        options.headers = withAuthorization(options.headers);
      } else {
        args.splice(1, 0, { headers: { authorization: `Bearer ${token}` } });
      }
    }
    return originalRequest.apply(this, args);
  };

  const script = process.argv[1];
  let undici = null;
  try {
    undici = script ? createRequire(realpathSync(script))("undici") : null;
  } catch {
    undici = null;
  }
  if (undici?.getGlobalDispatcher && undici?.setGlobalDispatcher) {
    const bearer = (dispatch) => (opts, handler) => {
      const target = `${opts.origin ?? ""}`;
      if (isLoopback(target) && !hasAuthorization(opts.headers)) {
        opts = { ...opts, headers: withAuthorization(opts.headers) };
      }
      return dispatch(opts, handler);
    };
    undici.setGlobalDispatcher(undici.getGlobalDispatcher().compose(bearer));
  } else {
    process.stderr.write("bearer-preload: undici not found next to the script; undici.request() runs without a token\n");
  }
}
