// Who is calling, as an address: the socket's peer, or, when that peer is a trusted proxy, the
// client the proxies forwarded (X-Forwarded-For read from the right, skipping trusted hops: the
// entries to the left of the last untrusted one are whatever the client chose to send). The
// address keys the failed-authentication budget and the connection cap, so an IPv6 address counts
// per /64 (what one site usually holds, and can rotate through at will) and an IPv4-mapped IPv6
// address as the IPv4 address it is.
import { BlockList, isIP } from 'node:net';

const CIDR = /^(.+)\/(\d{1,3})$/;
const MAPPED_IPV4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i;
const BRACKETED = /^\[([0-9a-f:.]+)\](?::\d{1,5})?$/i;
const IPV4_WITH_PORT = /^(\d+\.\d+\.\d+\.\d+):\d{1,5}$/;

function family(address: string): 'ipv4' | 'ipv6' | undefined {
  const version = isIP(address);
  return version === 4 ? 'ipv4' : version === 6 ? 'ipv6' : undefined;
}

/** An IP address, or a CIDR whose prefix fits its family (`10.0.0.0/8`, `fd00::/8`). */
export function isAddressOrCidr(text: string): boolean {
  const cidr = CIDR.exec(text);
  if (!cidr) return family(text) !== undefined;
  const kind = family(cidr[1] ?? '');
  const prefix = Number(cidr[2]);
  return kind !== undefined && prefix <= (kind === 'ipv4' ? 32 : 128);
}

/** `::ffff:10.1.2.3` as `10.1.2.3`; IPv6 in lower case. */
export function normaliseAddress(address: string): string {
  const mapped = MAPPED_IPV4.exec(address);
  return mapped?.[1] ?? address.toLowerCase();
}

/** The proxies whose X-Forwarded-For is believed (configured as addresses and CIDRs). */
export class TrustedProxies {
  readonly #list = new BlockList();
  readonly #empty: boolean;

  constructor(entries: readonly string[]) {
    this.#empty = entries.length === 0;
    for (const entry of entries) {
      if (!isAddressOrCidr(entry)) throw new Error(`trusted proxy '${entry}' is not an IP address or CIDR`);
      const cidr = CIDR.exec(entry);
      const address = cidr?.[1] ?? entry;
      const kind = family(address) ?? 'ipv4';
      if (cidr) this.#list.addSubnet(address, Number(cidr[2]), kind);
      else this.#list.addAddress(address, kind);
    }
  }

  trusts(address: string): boolean {
    if (this.#empty) return false;
    const kind = family(address);
    // BlockList matches IPv4 rules against IPv4-mapped IPv6 addresses as well.
    return kind !== undefined && this.#list.check(address, kind);
  }
}

/** One X-Forwarded-For entry as a bare address (`[::1]:80` and `1.2.3.4:80` lose their port). */
function bareAddress(entry: string): string | undefined {
  if (family(entry)) return entry;
  return BRACKETED.exec(entry)?.[1] ?? IPV4_WITH_PORT.exec(entry)?.[1];
}

/**
 * The client's address: the socket peer unless it is a trusted proxy; then, walking
 * X-Forwarded-For from the right, the first hop that is not a trusted proxy. An entry that is not
 * an address ends the walk at the last trusted hop: garbage never becomes a key of its own.
 */
export function clientAddress(
  socketAddress: string | undefined,
  forwardedFor: string | string[] | undefined,
  proxies: TrustedProxies,
): string {
  let client = normaliseAddress(socketAddress ?? '');
  if (!proxies.trusts(client) || forwardedFor === undefined) return client;
  const header = Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor;
  const hops = header.split(',').reverse();
  for (const hop of hops) {
    const address = bareAddress(hop.trim());
    if (address === undefined) return client;
    client = normaliseAddress(address);
    if (!proxies.trusts(client)) return client;
  }
  return client;
}

/** The eight 16-bit groups of an IPv6 address (`::` expanded, a trailing IPv4 part converted). */
function ipv6Groups(address: string): number[] {
  const [head = '', tail] = address.split('::', 2);
  const parse = (part: string): number[] =>
    part === ''
      ? []
      : part.split(':').flatMap((group) => {
          if (!group.includes('.')) return [Number.parseInt(group, 16)];
          const [a = 0, b = 0, c = 0, d = 0] = group.split('.').map(Number);
          return [(a << 8) | b, (c << 8) | d];
        });
  const front = parse(head);
  const back = tail === undefined ? [] : parse(tail);
  return [...front, ...Array<number>(8 - front.length - back.length).fill(0), ...back];
}

/** The key an address is counted under: IPv4 as is, IPv6 by its /64. */
export function addressKey(address: string): string {
  const normal = normaliseAddress(address.split('%')[0] ?? ''); // a zone (fe80::1%eth0) is no part of it
  if (isIP(normal) !== 6) return normal;
  const groups = ipv6Groups(normal).slice(0, 4);
  return `${groups.map((g) => g.toString(16)).join(':')}::/64`;
}
