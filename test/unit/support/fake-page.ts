// Just enough of a browser to run the self-service page's script (src/tokenissuer/portal/portal.js)
// in Node: a document with the page's elements (ids, text inputs' initial values and radio buttons
// read from index.html), the elements the script creates, events, and fetch() answered by the
// test. It is no DOM: it holds what portal.js touches, so unit tests can drive the page's logic
// (what it sends, when) without a browser; test/e2e/portal.test.ts runs the real page in Chromium.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

type Listener = (event: FakeEvent) => unknown;

export interface FakeEvent {
  type: string;
  preventDefault(): void;
}

export class FakeElement {
  readonly tag: string;
  id = '';
  type = '';
  name = '';
  value = '';
  checked = false;
  disabled = false;
  hidden = false;
  textContent = '';
  className = '';
  readonly dataset: Record<string, string> = {};
  readonly attributes = new Map<string, string>();
  children: FakeElement[] = [];
  parent: FakeElement | undefined;
  readonly classList = { toggle: (_name: string, _on?: boolean) => undefined };
  readonly #listeners = new Map<string, Listener[]>();

  constructor(tag: string) {
    this.tag = tag;
  }

  addEventListener(type: string, listener: Listener): void {
    this.#listeners.set(type, [...(this.#listeners.get(type) ?? []), listener]);
  }

  /** Calls the listeners of `type` as the browser would (their promises are not awaited). */
  dispatch(type: string): void {
    const event: FakeEvent = { type, preventDefault: () => undefined };
    for (const listener of this.#listeners.get(type) ?? []) void listener(event);
  }

  setAttribute(name: string, value: string): void {
    this.attributes.set(name, value);
  }
  focus(): void {}
  select(): void {}
  append(...items: (FakeElement | string)[]): void {
    for (const item of items) {
      if (typeof item === 'string') this.textContent += item;
      else {
        item.parent = this;
        this.children.push(item);
      }
    }
  }
  replaceChildren(...items: FakeElement[]): void {
    this.children = [];
    this.append(...items);
  }
  closest(tag: string): FakeElement | undefined {
    let at: FakeElement | undefined = this.parent;
    while (at && at.tag !== tag) at = at.parent;
    return at;
  }
}

/** What the page sent with fetch(). */
export interface SentRequest {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
}

/** How the test answers a request: a Response, or an Error to throw (a network failure). */
export type Answer = (request: SentRequest) => Response | Error | Promise<Response | Error>;

export class FakePage {
  readonly #byId = new Map<string, FakeElement>();
  /** Every input, from the HTML or created by the script, for the selectors below. */
  readonly #inputs: FakeElement[] = [];
  readonly #documentListeners = new Map<string, Listener[]>();
  readonly #windowListeners = new Map<string, Listener[]>();
  readonly sent: SentRequest[] = [];
  answer: Answer = () => new Error('no answer configured');

  constructor(html: string) {
    for (const match of html.matchAll(/<(\w+)\b([^>]*)\bid="([^"]+)"([^>]*)>/g)) {
      const element = this.element(match[3] ?? '', match[1] ?? 'div');
      const attributes = ` ${match[2]} ${match[4]}`;
      const value = /\svalue="([^"]*)"/.exec(attributes)?.[1];
      if (value !== undefined) element.value = value;
      element.hidden = /\shidden(?=[\s/]|$)/.test(attributes);
    }
    for (const match of html.matchAll(
      /<label([^>]*)><input type="radio" name="([^"]+)" value="([^"]+)"([^>]*)>/g,
    )) {
      const label = new FakeElement('label');
      label.hidden = /\shidden(?=[\s/]|$)/.test(match[1] ?? '');
      const radio = this.createElement('input');
      radio.type = 'radio';
      radio.name = match[2] ?? '';
      radio.value = match[3] ?? '';
      radio.checked = /\bchecked\b/.test(match[4] ?? '');
      radio.disabled = /\bdisabled\b/.test(match[4] ?? '');
      label.append(radio);
    }
  }

  element(id: string, tag = 'div'): FakeElement {
    let element = this.#byId.get(id);
    if (!element) {
      element = tag === 'input' ? this.createElement('input') : new FakeElement(tag);
      element.id = id;
      this.#byId.set(id, element);
    }
    return element;
  }

  createElement(tag: string): FakeElement {
    const element = new FakeElement(tag);
    if (tag === 'input') this.#inputs.push(element);
    return element;
  }

  /** `input[name="x"]`, optionally with `[value="y"]` and/or `:checked`: all the script asks for. */
  #matching(selector: string): FakeElement[] {
    const match = /^input\[name="([^"]+)"\](?:\[value="([^"]+)"\])?(:checked)?$/.exec(selector);
    if (!match) throw new Error(`the fake page does not know the selector ${selector}`);
    const [, name, value, checked] = match;
    return this.#inputs.filter(
      (i) => i.name === name && (value === undefined || i.value === value) && (!checked || i.checked),
    );
  }

  /** Installs document, window and fetch as globals; returns the function that removes them. */
  install(): () => void {
    const saved = {
      document: Reflect.get(globalThis, 'document'),
      window: Reflect.get(globalThis, 'window'),
    };
    const savedFetch = globalThis.fetch;
    const listen = (map: Map<string, Listener[]>) => (type: string, listener: Listener) =>
      map.set(type, [...(map.get(type) ?? []), listener]);
    Reflect.set(globalThis, 'document', {
      getElementById: (id: string) => this.#byId.get(id) ?? null,
      querySelector: (selector: string) => this.#matching(selector)[0] ?? null,
      querySelectorAll: (selector: string) => this.#matching(selector),
      createElement: (tag: string) => this.createElement(tag),
      addEventListener: listen(this.#documentListeners),
    });
    Reflect.set(globalThis, 'window', { addEventListener: listen(this.#windowListeners) });
    globalThis.fetch = (async (input: string, init: RequestInit = {}) => {
      const request: SentRequest = {
        url: String(input),
        method: init.method ?? 'GET',
        headers: { ...(init.headers as Record<string, string>) },
        body: typeof init.body === 'string' ? init.body : undefined,
      };
      this.sent.push(request);
      const answer = await this.answer(request);
      if (answer instanceof Error) throw answer;
      return answer;
    }) as typeof fetch;
    return () => {
      Reflect.set(globalThis, 'document', saved.document);
      Reflect.set(globalThis, 'window', saved.window);
      globalThis.fetch = savedFetch;
    };
  }

  /** The browser's DOMContentLoaded. */
  loaded(): void {
    for (const listener of this.#documentListeners.get('DOMContentLoaded') ?? [])
      void listener({ type: 'DOMContentLoaded', preventDefault: () => undefined });
  }
}

/** The self-service page's HTML, as served. */
export function portalHtml(): string {
  return readFileSync(
    join(import.meta.dirname, '..', '..', '..', 'src', 'tokenissuer', 'portal', 'index.html'),
    'utf8',
  );
}

/** Resolves once `condition` holds (the script's awaits run in micro- and macrotasks). */
export async function until(what: string, condition: () => boolean, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}
