// Build the views into one self-contained HTML file (script and style inline, a CSP with their
// hashes and no external domain), mcp_notebook/views/views.html, and the test host under
// tests/apps_host/dist/.
//   node build.mjs [--out DIR] [--host]
import { build } from 'esbuild';
import { createHash } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const outAt = args.indexOf('--out');
const out = outAt >= 0 ? resolve(args[outAt + 1]) : join(here, '..', 'mcp_notebook', 'views');

// zod bundles every locale's error messages (about 260 kB minified) behind `z.locales`; the views
// only ever use English, which zod registers itself, so the locale index keeps English alone.
const zodLocales = join(here, 'node_modules', 'zod', 'v4', 'locales', 'index.js');
if (!readFileSync(zodLocales, 'utf8').includes('export { default as en } from "./en.js";')) {
  throw new Error(`${zodLocales} changed: check the English-only locale stub in views/build.mjs`);
}
const englishOnly = {
  name: 'zod-english-only',
  setup(b) {
    b.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, () => ({
      contents: 'export { default as en } from "./en.js";\n',
      resolveDir: dirname(zodLocales),
      loader: 'js',
    }));
  },
};

const bundle = await build({
  entryPoints: [join(here, 'src', 'main.ts')],
  bundle: true,
  minify: true,
  format: 'iife',
  target: 'es2020',
  write: false,
  legalComments: 'none',
  charset: 'utf8',
  logLevel: 'warning',
  plugins: [englishOnly],
});
const script = bundle.outputFiles[0].text.replaceAll('</script', '<\\/script').trimEnd();
// Kernel text must only ever become text nodes: no markup sinks anywhere in our sources.
const BANNED =
  /\b(innerHTML|outerHTML|insertAdjacentHTML|createContextualFragment|srcdoc)\b|document\.write|DOMParser|\beval\s*\(|new Function\b/;
for (const file of readdirSync(join(here, 'src'))) {
  const found = BANNED.exec(readFileSync(join(here, 'src', file), 'utf8'));
  if (found) throw new Error(`views/src/${file} uses ${found[0]}: kernel text must stay text`);
}
const style = readFileSync(join(here, 'src', 'style.css'), 'utf8').trim();
const hash = text => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;
const csp = [
  "default-src 'none'",
  `script-src ${hash(script)}`,
  `style-src ${hash(style)}`,
  'img-src data:',
  "connect-src 'none'",
  "font-src 'none'",
  "frame-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');
mkdirSync(out, { recursive: true });
// One file for the three views: the hub fills in data-view and the title per ui:// resource
// (providers/views.py); the CSP's hashes cover the script and style, which all three share.
const html = `<!doctype html>
<html lang="en" data-view="__VIEW__">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<title>__TITLE__ · mcp-notebook</title>
<style>${style}</style>
</head>
<body>
<div id="root"></div>
<script>${script}</script>
</body>
</html>
`;
writeFileSync(join(out, 'views.html'), html);
const size = text => `${Buffer.byteLength(text)} bytes (${gzipSync(text, { level: 9 }).length} gzip)`;
console.log(`views: ${join(out, 'views.html')}; script ${size(script)}, style ${size(style)}`);

if (args.includes('--host')) {
  await build({
    entryPoints: [join(here, '..', 'tests', 'apps_host', 'host.ts')],
    bundle: true,
    format: 'iife',
    target: 'es2020',
    outfile: join(here, '..', 'tests', 'apps_host', 'dist', 'host.js'),
    logLevel: 'warning',
    nodePaths: [join(here, 'node_modules')],
  });
  console.log('test host: tests/apps_host/dist/host.js');
}
