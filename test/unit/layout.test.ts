// The source layout's layers (docs/architecture.md "Source layout"): each folder imports only from
// the folders below it, so the framework can be read and changed without the product, and no
// part of the product reaches into another. A new import that runs back up fails here, by name.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';

const SRC = resolve(import.meta.dirname, '../../src');

/** What each folder may import from, besides itself. `top` is src/config.ts: every part's settings. */
const MAY_IMPORT: Record<string, readonly string[]> = {
  flavor: [],
  pki: ['flavor'],
  runtime: [],
  kube: ['flavor', 'runtime'],
  controller: ['flavor', 'pki', 'runtime', 'kube', 'top'],
  webhook: ['flavor', 'pki', 'runtime', 'kube', 'top'],
  tokenissuer: ['flavor', 'pki', 'runtime', 'kube'],
  capi: ['flavor', 'runtime', 'top'],
  top: ['flavor', 'tokenissuer'],
  cli: ['flavor', 'pki', 'runtime', 'kube', 'controller', 'webhook', 'tokenissuer', 'capi', 'top'],
};

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return /\.(ts|js)$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

function folderOf(path: string): string {
  const parts = relative(SRC, path).split('/');
  return parts.length === 1 ? 'top' : (parts[0] ?? 'top');
}

/** Relative specifiers of static and dynamic imports and re-exports. */
function importsOf(text: string): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(/(?:from|import)\s*\(?\s*'(\.[^']+)'/g)) found.push(match[1] ?? '');
  return found;
}

describe('source layout', () => {
  const files = sourceFiles(SRC);

  it('knows every folder under src/', () => {
    const folders = new Set(files.map(folderOf));
    assert.deepEqual(
      [...folders].filter((folder) => !(folder in MAY_IMPORT)),
      [],
    );
  });

  it('has no import running back up the layers, nor from one part of the product into another', () => {
    const wrong: string[] = [];
    for (const file of files) {
      const from = folderOf(file);
      for (const specifier of importsOf(readFileSync(file, 'utf8'))) {
        const to = folderOf(resolve(dirname(file), specifier));
        if (to !== from && !MAY_IMPORT[from]?.includes(to)) {
          wrong.push(`${relative(SRC, file)} imports ${specifier}`);
        }
      }
    }
    assert.deepEqual(wrong, []);
  });

  it('keeps the top-level settings to the issuer settings they compose', () => {
    const config = readFileSync(join(SRC, 'config.ts'), 'utf8');
    const issuerImports = importsOf(config).filter((specifier) => specifier.startsWith('./tokenissuer/'));
    assert.deepEqual(issuerImports, ['./tokenissuer/config.ts']);
  });

  it('keeps the pure core free of I/O', () => {
    const io =
      /from '(node:(fs|net|http|https|child_process|dgram|tls)|undici|fastify|@kubernetes\/client-node)(\/[^']*)?'/;
    const impure = sourceFiles(join(SRC, 'flavor')).filter((file) => io.test(readFileSync(file, 'utf8')));
    assert.deepEqual(
      impure.map((file) => relative(SRC, file)),
      [],
    );
  });
});
