import type { ImageMediaType } from '../llm/chat-model.js';

/** What the first bytes of a file say about an image the model can read. */
export interface ImageInfo {
  mediaType: ImageMediaType;
  /** 0 when the header does not say (the estimate then assumes the largest image). */
  width: number;
  height: number;
}

/**
 * Recognizes PNG, JPEG, GIF and WebP by their signatures (never by the name or the declared
 * type, which anyone can get wrong) and reads their dimensions from the header.
 */
export function sniffImage(bytes: Uint8Array): ImageInfo | undefined {
  const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (data.length >= 24 && data.readUInt32BE(0) === 0x89504e47 && data.readUInt32BE(4) === 0x0d0a1a0a) {
    return { mediaType: 'image/png', width: data.readUInt32BE(16), height: data.readUInt32BE(20) };
  }
  if (data.length >= 10 && (data.toString('latin1', 0, 6) === 'GIF87a' || data.toString('latin1', 0, 6) === 'GIF89a')) {
    return { mediaType: 'image/gif', width: data.readUInt16LE(6), height: data.readUInt16LE(8) };
  }
  if (data.length >= 3 && data[0] === 0xff && data[1] === 0xd8 && data[2] === 0xff) {
    return { mediaType: 'image/jpeg', ...jpegSize(data) };
  }
  if (data.length >= 12 && data.toString('latin1', 0, 4) === 'RIFF' && data.toString('latin1', 8, 12) === 'WEBP') {
    return { mediaType: 'image/webp', ...webpSize(data) };
  }
  return undefined;
}

function jpegSize(data: Buffer): { width: number; height: number } {
  let at = 2;
  while (at + 9 < data.length) {
    if (data[at] !== 0xff) {
      at += 1;
      continue;
    }
    const marker = data[at + 1]!;
    // Start-of-frame markers (baseline, progressive, ...) carry the size; DHT, JPG and DAC do not.
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return { height: data.readUInt16BE(at + 5), width: data.readUInt16BE(at + 7) };
    }
    if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      at += 2;
      continue;
    }
    at += 2 + data.readUInt16BE(at + 2);
  }
  return { width: 0, height: 0 };
}

function webpSize(data: Buffer): { width: number; height: number } {
  const chunk = data.toString('latin1', 12, 16);
  if (chunk === 'VP8X' && data.length >= 30) {
    return { width: 1 + data.readUIntLE(24, 3), height: 1 + data.readUIntLE(27, 3) };
  }
  if (chunk === 'VP8L' && data.length >= 25) {
    const bits = data.readUInt32LE(21);
    return { width: 1 + (bits & 0x3fff), height: 1 + ((bits >> 14) & 0x3fff) };
  }
  if (chunk === 'VP8 ' && data.length >= 30) {
    return { width: data.readUInt16LE(26) & 0x3fff, height: data.readUInt16LE(28) & 0x3fff };
  }
  return { width: 0, height: 0 };
}
