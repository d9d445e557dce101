// Reading TPM-marshalled bytes (TPM 2.0 Part 2: big-endian integers, TPM2B = u16 size + bytes).
// The bytes come from a node, so every read is bounds-checked and a short or malformed input is a
// TpmFormatError with what was being read, never an out-of-range read or a crash.

export class TpmFormatError extends Error {
  override name = 'TpmFormatError';
}

export class TpmReader {
  private offset = 0;
  private readonly bytes: Uint8Array;
  /** What is being read, for the error messages ("AK public area"). */
  private readonly what: string;

  constructor(bytes: Uint8Array, what: string) {
    this.bytes = bytes;
    this.what = what;
  }

  get remaining(): number {
    return this.bytes.length - this.offset;
  }

  u16(field: string): number {
    const chunk = this.take(2, field);
    return (chunk[0]! << 8) | chunk[1]!;
  }

  u32(field: string): number {
    const chunk = this.take(4, field);
    return ((chunk[0]! << 24) | (chunk[1]! << 16) | (chunk[2]! << 8) | chunk[3]!) >>> 0;
  }

  /** A TPM2B: a u16 size, then that many bytes. */
  sized(field: string): Buffer {
    return this.take(this.u16(`${field} size`), field);
  }

  take(length: number, field: string): Buffer {
    if (length > this.remaining) {
      throw new TpmFormatError(
        `${this.what}: ${field} needs ${length} bytes at offset ${this.offset}, only ${this.remaining} left`,
      );
    }
    const chunk = Buffer.from(this.bytes.subarray(this.offset, this.offset + length));
    this.offset += length;
    return chunk;
  }

  /** A structure must be read to its last byte: trailing bytes mean it was not what we think. */
  end(): void {
    if (this.remaining !== 0) {
      throw new TpmFormatError(`${this.what}: ${this.remaining} unexpected bytes after the structure`);
    }
  }
}

export function u16Bytes(value: number): Buffer {
  const out = Buffer.alloc(2);
  out.writeUInt16BE(value);
  return out;
}

export function u32Bytes(value: number): Buffer {
  const out = Buffer.alloc(4);
  out.writeUInt32BE(value);
  return out;
}

/** Marshals a TPM2B: the u16 size, then the bytes. */
export function sizedBytes(bytes: Uint8Array): Buffer {
  if (bytes.length > 0xffff) throw new RangeError(`a TPM2B holds at most 65535 bytes, not ${bytes.length}`);
  return Buffer.concat([u16Bytes(bytes.length), bytes]);
}
