// A controller cache (src/controller/context.ts Cache) over a Map the test fills: always synced.
// `assume` keeps a copy of what the reconcilers wrote, as the real cache serves it until the
// watch brings it.
import type { Cache } from '../../../src/controller/context.ts';

export class MapCache<T extends { metadata: { name?: string } }> implements Cache<T> {
  readonly objects = new Map<string, T>();
  readonly hasSynced = true;
  constructor(...objects: T[]) {
    for (const object of objects) this.objects.set(object.metadata.name as string, object);
  }
  get(key: string) {
    return this.objects.get(key);
  }
  list() {
    return [...this.objects.values()];
  }
  keys() {
    return [...this.objects.keys()];
  }
  assume(raw: unknown) {
    const object = structuredClone(raw as T);
    this.objects.set(object.metadata.name as string, object);
  }
}
