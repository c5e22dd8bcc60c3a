/**
 * The Redis Cluster hash slot of a key (CRC16/XMODEM of its hash tag, or of the whole key, mod
 * 16384), as every cluster node computes it: which shard a script's keys go to, so that a lock
 * over resources in several slots can be split into one script per slot.
 */
export function keySlot(key: string): number {
  const bytes = Buffer.from(key, 'utf8');
  let start = 0;
  let end = bytes.length;
  const open = bytes.indexOf(0x7b); // '{'
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1); // '}'
    // An empty tag ("{}") does not count: the whole key is hashed then.
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  return crc16(bytes, start, end) % 16384;
}

const TABLE = (() => {
  const table = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let crc = i << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    table[i] = crc;
  }
  return table;
})();

function crc16(bytes: Uint8Array, start: number, end: number): number {
  let crc = 0;
  for (let i = start; i < end; i++) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ bytes[i]!) & 0xff]!;
  return crc;
}
