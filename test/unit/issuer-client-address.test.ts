// Who the client is (client-address.ts): the socket peer, or behind a trusted proxy the first
// untrusted hop of X-Forwarded-For from the right; and the key an address is counted under.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  addressKey,
  clientAddress,
  isAddressOrCidr,
  TrustedProxies,
} from '../../src/tokenissuer/defences/client-address.ts';

describe('trusted proxies', () => {
  it('accepts addresses and CIDRs, nothing else', () => {
    for (const good of ['10.0.0.1', '10.0.0.0/8', '::1', 'fd00::/8', '0.0.0.0/0', '2001:db8::/128']) {
      assert.ok(isAddressOrCidr(good), good);
    }
    for (const bad of ['', 'loopback', '10.0.0.0/33', '::/129', '10.0.0', 'example.com', '10.0.0.1/']) {
      assert.ok(!isAddressOrCidr(bad), bad);
    }
    assert.throws(() => new TrustedProxies(['uniquelocal']), /not an IP address or CIDR/);
  });

  it('matches IPv4 rules against IPv4-mapped IPv6 peers', () => {
    const proxies = new TrustedProxies(['10.0.0.0/8', '2001:db8::/32']);
    assert.ok(proxies.trusts('10.9.8.7'));
    assert.ok(proxies.trusts('::ffff:10.9.8.7'));
    assert.ok(proxies.trusts('2001:db8::1'));
    assert.ok(!proxies.trusts('11.0.0.1'));
    assert.ok(!proxies.trusts('not-an-address'));
    assert.ok(!new TrustedProxies([]).trusts('10.0.0.1'));
  });
});

describe('clientAddress', () => {
  const proxies = new TrustedProxies(['10.0.0.0/8']);

  it('is the socket peer when that peer is not a trusted proxy, whatever it forwards', () => {
    assert.equal(clientAddress('192.0.2.1', '198.51.100.7', proxies), '192.0.2.1');
    assert.equal(clientAddress('::ffff:192.0.2.1', undefined, proxies), '192.0.2.1');
    assert.equal(clientAddress('10.1.1.1', '198.51.100.7', new TrustedProxies([])), '10.1.1.1');
  });

  it('behind trusted proxies, is the first untrusted hop from the right', () => {
    assert.equal(clientAddress('10.1.1.1', '198.51.100.7', proxies), '198.51.100.7');
    // The client's own (spoofed) entries sit left of what the proxy appended.
    assert.equal(clientAddress('10.1.1.1', '203.0.113.9, 198.51.100.7', proxies), '198.51.100.7');
    // Two proxies in a row.
    assert.equal(clientAddress('10.1.1.1', '198.51.100.7, 10.2.2.2', proxies), '198.51.100.7');
    // Repeated headers, as Node joins them.
    assert.equal(clientAddress('10.1.1.1', ['203.0.113.9', '198.51.100.7'], proxies), '198.51.100.7');
    // Ports and brackets.
    assert.equal(clientAddress('10.1.1.1', '198.51.100.7:4711', proxies), '198.51.100.7');
    assert.equal(clientAddress('10.1.1.1', '[2001:DB8::7]:443', proxies), '2001:db8::7');
  });

  it('stops at the last trusted hop at an entry that is not an address (garbage never becomes a key)', () => {
    assert.equal(clientAddress('10.1.1.1', 'unknown', proxies), '10.1.1.1');
    assert.equal(clientAddress('10.1.1.1', '198.51.100.7, garbage, 10.2.2.2', proxies), '10.2.2.2');
    assert.equal(clientAddress('10.1.1.1', '', proxies), '10.1.1.1');
  });

  it('is the leftmost address when every hop is a trusted proxy', () => {
    assert.equal(clientAddress('10.1.1.1', '10.3.3.3, 10.2.2.2', proxies), '10.3.3.3');
  });
});

describe('addressKey', () => {
  it('counts IPv4 as is and IPv6 per /64', () => {
    assert.equal(addressKey('192.0.2.1'), '192.0.2.1');
    assert.equal(addressKey('::ffff:192.0.2.1'), '192.0.2.1');
    assert.equal(addressKey('2001:db8:1:2:aaaa::1'), '2001:db8:1:2::/64');
    assert.equal(addressKey('2001:DB8:1:2:bbbb:cccc:dddd:eeee'), '2001:db8:1:2::/64');
    assert.equal(addressKey('::1'), '0:0:0:0::/64');
    assert.equal(addressKey('fe80::1%eth0'), 'fe80:0:0:0::/64');
    assert.equal(addressKey('2001:db8::1.2.3.4'), '2001:db8:0:0::/64');
    assert.equal(addressKey(''), '');
  });
});
