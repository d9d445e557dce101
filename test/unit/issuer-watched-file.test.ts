// The attestation files (src/tokenissuer/attestation/watched-file.ts, attestation-files.ts): read once, re-read
// in the background when the file changed (never on a request's path), the last good content kept
// when a changed file cannot be used.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { attestationFiles } from '../../src/tokenissuer/attestation/attestation-files.ts';
import { WatchedFile } from '../../src/tokenissuer/attestation/watched-file.ts';

const fixture = (name: string) => readFileSync(join(import.meta.dirname, 'fixtures', 'tpm', name), 'utf8');

let dir = '';
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'nodeflavor-watched-file-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** Replaces `path` the way the kubelet updates a mounted ConfigMap: a new file renamed over it. */
function replace(path: string, text: string): void {
  writeFileSync(`${path}.new`, text);
  renameSync(`${path}.new`, path);
}

describe('WatchedFile', () => {
  it('reads once; within the recheck period nothing is looked at again', async () => {
    const path = join(dir, 'once.txt');
    writeFileSync(path, 'one');
    let parses = 0;
    let now = 0;
    const parse = (bytes: Buffer) => {
      parses += 1;
      return bytes.toString();
    };
    const file = new WatchedFile(path, parse, { recheckMs: 1000, now: () => now });
    assert.equal(await file.current(), 'one');
    replace(path, 'two');
    now = 999;
    assert.equal(await file.current(), 'one');
    await file.settled();
    assert.equal(parses, 1);
  });

  it('after the recheck period, a changed file is re-read in the background: the next use sees it', async () => {
    const path = join(dir, 'changed.txt');
    writeFileSync(path, 'one');
    let now = 0;
    const file = new WatchedFile(path, (b) => b.toString(), { recheckMs: 1000, now: () => now });
    assert.equal(await file.current(), 'one');
    replace(path, 'two');
    now = 1000;
    assert.equal(await file.current(), 'one', 'this use does not wait for the file');
    await file.settled();
    assert.equal(await file.current(), 'two');
  });

  it('a changed file that cannot be used keeps the last good value, and says so', async () => {
    const path = join(dir, 'bad.txt');
    writeFileSync(path, 'good');
    let now = 0;
    const errors: string[] = [];
    const file = new WatchedFile(
      path,
      (b) => {
        if (b.toString() === 'bad') throw new Error('not parseable');
        return b.toString();
      },
      { recheckMs: 10, now: () => now, onError: (p, e) => errors.push(`${p}: ${e.message}`) },
    );
    assert.equal(await file.current(), 'good');
    replace(path, 'bad');
    now = 10;
    await file.current();
    await file.settled();
    assert.equal(await file.current(), 'good');
    assert.deepEqual(errors, [`${path}: not parseable`]);
    rmSync(path);
    now = 20;
    await file.current();
    await file.settled();
    assert.equal(await file.current(), 'good', 'a file gone (mid-swap) keeps it too');
  });

  it('a file that cannot be read at first is an error each time, until it can be', async () => {
    const path = join(dir, 'late.txt');
    const file = new WatchedFile(path, (b) => b.toString());
    await assert.rejects(file.current(), /ENOENT/);
    writeFileSync(path, 'here');
    assert.equal(await file.current(), 'here');
  });
});

describe('attestationFiles', () => {
  it('a manufacturer CA file changed into one without a root keeps the trust it had', async () => {
    const path = join(dir, 'cas.pem');
    writeFileSync(path, fixture('manufacturer-a-root.pem') + fixture('manufacturer-a-intermediate.pem'));
    const errors: string[] = [];
    const files = attestationFiles(
      { manufacturerCaFile: path },
      { recheckMs: 0, onError: (_path, error) => errors.push(error.message) },
    );
    const first = await files.manufacturerTrust();
    assert.equal(first?.roots.length, 1);
    replace(path, fixture('manufacturer-a-intermediate.pem'));
    // Until the background re-read has judged the new file (a deadline, not a count of turns:
    // parsing certificates on a loaded machine takes longer than a few event-loop turns).
    const deadline = Date.now() + 10_000;
    while (errors.length === 0 && Date.now() < deadline) {
      assert.equal(await files.manufacturerTrust(), first);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    assert.match(errors[0] ?? '', /no root \(self-signed\) certificate/);
    assert.equal(await files.manufacturerTrust(), first);
  });

  it('none configured: no trust, no issuer CA; an unreadable one names the file', async () => {
    const none = attestationFiles({});
    assert.equal(await none.manufacturerTrust(), undefined);
    assert.equal(await none.issuerCaPem(), undefined);
    const missing = attestationFiles({ issuerCaFile: join(dir, 'missing.pem') });
    await assert.rejects(
      none.manufacturerTrust().then(() => missing.issuerCaPem()),
      /cannot read the attestation CA file .*missing\.pem: ENOENT/,
    );
  });
});
