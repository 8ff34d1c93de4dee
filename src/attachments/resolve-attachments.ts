import { errorMessage } from '../common/errors.js';
import type { ImageMediaType } from '../llm/chat-model.js';
import { estimateTokens, MESSAGE_FRAMING_TOKENS } from '../context/token-estimate.js';
import { classifyAttachment, decodeUtf8Text, formatSize } from './attachment-kind.js';
import { sniffImage } from './image-info.js';
import { estimateImageTokens } from '../context/image-tokens.js';

/**
 * The Messages API takes images of at most 5 MB once base64-encoded, i.e. about 3.75 MB of
 * bytes; a larger one stays a placeholder rather than failing every request of the channel.
 */
export const MAX_IMAGE_BYTES = 3_750_000;
/** A text file is read only as far as its first `max_attachment_chars` characters need. */
const BYTES_PER_CHAR_MAX = 4;
const DOWNLOAD_TIMEOUT_MS = 15_000;

/** A file attached to a message, as the platform describes it. */
export interface AttachmentSource {
  name: string;
  /** Bytes, as declared. */
  size: number;
  contentType?: string;
  /** Declared by Discord for images; read from the header otherwise. */
  width?: number;
  height?: number;
  /** Where to download it (a chat platform's file URL)... */
  url?: string;
  /** ...or its bytes (a local file given to `magpie chat`). */
  data?: Uint8Array;
}

export type ResolvedAttachment =
  | { kind: 'image'; name: string; size: number; mediaType: ImageMediaType; width: number; height: number; tokens: number; data: string }
  | { kind: 'text'; name: string; size: number; text: string; truncated: boolean; maxChars: number; tokens: number }
  /** Stays a placeholder; `failed` when it could not be downloaded (its placeholder is left as it was). */
  | { kind: 'file'; name: string; size: number; note?: string; failed?: boolean };

export interface ResolveOptions {
  vision: boolean;
  maxImages: number;
  maxChars: number;
  fetch?: typeof fetch;
  signal?: AbortSignal;
}

/**
 * Downloads what the model can use of a message's files, once: images (up to `maxImages`,
 * within the size limit) as base64 with their token estimate, text files inlined up to
 * `maxChars`. Everything else, and anything that cannot be downloaded, stays a placeholder
 * saying why. Never throws.
 */
export async function resolveAttachments(sources: readonly AttachmentSource[], options: ResolveOptions): Promise<ResolvedAttachment[]> {
  const resolved: ResolvedAttachment[] = [];
  let images = 0;
  for (const source of sources) {
    const kind = classifyAttachment(source.name, source.contentType);
    const base = { name: source.name, size: source.size };
    try {
      if (kind === 'image' && options.vision) {
        if (images >= options.maxImages) {
          resolved.push({ kind: 'file', ...base, note: `not shown: more than ${options.maxImages} images in one message` });
          continue;
        }
        if (source.size > MAX_IMAGE_BYTES) {
          resolved.push({ kind: 'file', ...base, note: 'not shown: image too large' });
          continue;
        }
        const { bytes, complete } = await load(source, MAX_IMAGE_BYTES + 1, options);
        const info = complete ? sniffImage(bytes) : undefined;
        if (!info) {
          resolved.push({ kind: 'file', ...base, note: complete ? 'not shown: not a PNG, JPEG, GIF or WebP image' : 'not shown: image too large' });
          continue;
        }
        const width = info.width || source.width || 0;
        const height = info.height || source.height || 0;
        images += 1;
        resolved.push({
          kind: 'image',
          name: source.name,
          size: bytes.length,
          mediaType: info.mediaType,
          width,
          height,
          tokens: estimateImageTokens(width, height),
          data: Buffer.from(bytes).toString('base64'),
        });
        continue;
      }
      if (kind === 'text' && options.maxChars > 0) {
        const limit = options.maxChars * BYTES_PER_CHAR_MAX;
        const { bytes, complete } = await load(source, limit, options);
        const decoded = decodeUtf8Text(bytes, { cut: !complete });
        if (decoded === undefined) {
          resolved.push({ kind: 'file', ...base, note: 'not shown: not UTF-8 text' });
          continue;
        }
        const truncated = !complete || decoded.length > options.maxChars;
        const text = truncated ? decoded.slice(0, options.maxChars) : decoded;
        const partial = { kind: 'text' as const, name: source.name, size: source.size || bytes.length, text, truncated, maxChars: options.maxChars };
        resolved.push({ ...partial, tokens: estimateTokens(renderTextFile(partial)) + MESSAGE_FRAMING_TOKENS });
        continue;
      }
      resolved.push({ kind: 'file', ...base });
    } catch (error) {
      resolved.push({ kind: 'file', ...base, note: `not shown: could not be downloaded (${clip(errorMessage(error), 80)})`, failed: true });
    }
  }
  return resolved;
}

/** How an inlined text file reads to the model. */
export function renderTextFile(file: { name: string; text: string; truncated: boolean; maxChars: number }): string {
  const cut = file.truncated ? `\n[cut here: the file is longer than ${file.maxChars.toLocaleString('en-US')} characters]` : '';
  return `Attached file ${file.name}:\n${file.text}${cut}`;
}

/** The placeholder that stands for a file in history and the archive: its name and size. */
export function placeholderOf(file: ResolvedAttachment): string {
  if (file.kind === 'image') {
    const dimensions = file.width > 0 && file.height > 0 ? `, ${file.width}×${file.height}` : '';
    return `[image: ${file.name}${dimensions}, ${formatSize(file.size)}]`;
  }
  if (file.kind === 'text') {
    return `[file: ${file.name}, ${formatSize(file.size)}${file.truncated ? `, first ${file.maxChars.toLocaleString('en-US')} characters shown` : ''}]`;
  }
  return `[attachment: ${file.name}, ${formatSize(file.size)}${file.note ? `, ${file.note}` : ''}]`;
}

async function load(source: AttachmentSource, maxBytes: number, options: ResolveOptions): Promise<{ bytes: Uint8Array; complete: boolean }> {
  if (source.data) {
    return source.data.length > maxBytes ? { bytes: source.data.subarray(0, maxBytes), complete: false } : { bytes: source.data, complete: true };
  }
  if (!source.url) throw new Error('no URL');
  const url = new URL(source.url);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`unsupported URL scheme ${url.protocol}`);
  const signals = [AbortSignal.timeout(DOWNLOAD_TIMEOUT_MS), ...(options.signal ? [options.signal] : [])];
  const response = await (options.fetch ?? fetch)(url, { signal: AbortSignal.any(signals) });
  if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
  // Read only what is needed: a 50 MB log file must not be held in memory to show 20,000 characters.
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let length = 0;
  let complete = true;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    length += value.length;
    if (length > maxBytes) {
      complete = false;
      await reader.cancel().catch(() => {});
      break;
    }
  }
  const bytes = Buffer.concat(chunks);
  return { bytes: complete ? bytes : bytes.subarray(0, maxBytes), complete };
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
