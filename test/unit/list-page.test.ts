import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { parseListPage } from '../../src/runtime/list-page.ts';

const identity = (raw: unknown) => raw;

/** What parsing the whole page gives: the reference every split must equal. */
function wholePage(text: string) {
  const page = JSON.parse(text) as { metadata?: unknown; items?: unknown[] };
  return { metadata: page.metadata, items: page.items ?? [] };
}

/** Counts the calls of `transform` and which objects it saw. */
function counting() {
  const seen: unknown[] = [];
  return {
    seen,
    transform: (raw: unknown) => {
      seen.push(raw);
      return raw;
    },
  };
}

describe('parseListPage', () => {
  const node = (name: string) => ({
    metadata: {
      name,
      labels: { 'kubernetes.io/os': 'linux' },
      annotations: { note: '},{"metadata":{"x":1}' },
    },
    spec: { taints: [{ key: 'a', effect: 'NoSchedule' }] },
    status: { images: [{ names: ['x'], sizeBytes: 1 }] },
  });

  test('splits a page as the API server writes it, item by item, each through the transform once', () => {
    const text = JSON.stringify({
      kind: 'NodeList',
      apiVersion: 'v1',
      metadata: { resourceVersion: '42', continue: 'eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ' },
      items: [node('a'), node('b'), node('c')],
    });
    const { seen, transform } = counting();
    const page = parseListPage(text, transform);
    assert.deepEqual(page, wholePage(text));
    // Three calls, not six: the split held (a fallback would have transformed the items again).
    assert.equal(seen.length, 3);
    assert.deepEqual(page.metadata, { resourceVersion: '42', continue: 'eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ' });
  });

  test('an empty list, a one-item list and a trailing newline', () => {
    for (const items of [[], [node('only')]]) {
      const text = `${JSON.stringify({ kind: 'NodeList', metadata: { resourceVersion: '7' }, items })}\n`;
      assert.deepEqual(parseListPage(text, identity), wholePage(text));
    }
  });

  test('the transform keeps only what it returns', () => {
    const text = JSON.stringify({ metadata: {}, items: [node('a'), node('b')] });
    const page = parseListPage(text, (raw) => (raw as { metadata: { name: string } }).metadata.name);
    assert.deepEqual(page.items, ['a', 'b']);
  });

  test('the separator inside an item (nested objects with the same first key) falls back to the whole page', () => {
    const tricky = { metadata: { name: 'x' }, nested: [{ metadata: { a: 1 } }, { metadata: { b: 2 } }] };
    const text = JSON.stringify({ metadata: { resourceVersion: '1' }, items: [tricky, node('y'), tricky] });
    const { seen, transform } = counting();
    const page = parseListPage(text, transform);
    assert.deepEqual(page, wholePage(text));
    assert.equal(page.items.length, 3);
    assert.ok(seen.length >= 3);
  });

  test('pretty-printed, items not last, items null or missing: the whole page decides', () => {
    const pages = [
      JSON.stringify({ metadata: { resourceVersion: '1' }, items: [node('a'), node('b')] }, null, 2),
      JSON.stringify({ items: [node('a'), node('b')], metadata: { resourceVersion: '1' } }),
      JSON.stringify({ metadata: { resourceVersion: '1' }, items: null }),
      JSON.stringify({ metadata: { resourceVersion: '1' } }),
      JSON.stringify({ metadata: { resourceVersion: '1' }, items: [1, 'two', [3]] }),
    ];
    for (const text of pages) assert.deepEqual(parseListPage(text, identity), wholePage(text));
  });

  test("a nested `items` before the root's own (spelt differently, or not last) is not taken for it", () => {
    const pages = [
      '{"items": [],"x":{"items":[{"a":1},{"a":2}]}}',
      '{"items" :[],"metadata":{"resourceVersion":"1","items":[{"metadata":{"name":"n"}}]}}',
      '{"\\u0069tems":[],"metadata":{"items":[{"a":1}]}}',
      '{"metadata":{},"items":[{"a":1},{"a":2}],"items":[{"a":3}]}',
      '{"metadata":{},"items":[{"a":1}],"x":"]"}',
    ];
    for (const text of pages) {
      const { seen, transform } = counting();
      const page = parseListPage(text, transform);
      assert.deepEqual(page, wholePage(text), text);
      // The transform saw only the page's real items, except where a split gave up part-way (a
      // duplicate `items`): it may then have seen earlier pieces, which is why it must be pure.
      if (text.includes('],"items"')) continue;
      for (const object of seen)
        assert.ok(
          page.items.some((item) => isDeepStrictEqual(item, object)),
          text,
        );
    }
  });

  test('text that is not JSON throws, as JSON.parse does', () => {
    assert.throws(() => parseListPage('{"metadata":{},"items":[{"a":1},{"a":', identity), SyntaxError);
    assert.throws(() => parseListPage('<html>', identity), SyntaxError);
  });

  test('property: equals parsing the whole page, whatever the items hold', () => {
    // Few distinct keys, so that items and nested objects often share their first key.
    const key = fc.constantFrom('metadata', 'spec', 'items', 'a', '},{"metadata":');
    const value = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        fc.constantFrom(null, true, 1, -2.5, '', '},{"metadata":', ']', '"items":['),
        fc.string(),
        fc.array(tie('value'), { maxLength: 3 }),
        fc.dictionary(key, tie('value'), { maxKeys: 3 }),
      ),
    })).value;
    const item = fc.dictionary(key, value, { minKeys: 1, maxKeys: 4 });
    fc.assert(
      fc.property(
        fc.array(item, { maxLength: 6 }),
        fc.record({ resourceVersion: fc.string(), continue: fc.string() }, { requiredKeys: [] }),
        fc.boolean(),
        (items, metadata, itemsLast) => {
          // Another writer could put `items` before a field that holds brackets of its own.
          const page = itemsLast
            ? { kind: 'ThingList', apiVersion: 'v1', metadata, items }
            : { kind: 'ThingList', items, metadata, extra: [{ metadata: [] }, ']'] };
          const text = JSON.stringify(page);
          assert.deepEqual(parseListPage(text, identity), wholePage(text));
        },
      ),
      { numRuns: 500 },
    );
  });
});
