/** What an attachment can be for the model. */
export type AttachmentKind = 'image' | 'text' | 'binary';

const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/jpg', 'image/gif', 'image/webp']);
const IMAGE_EXTENSIONS = new Set(['png', 'jpg', 'jpeg', 'gif', 'webp']);

const TEXT_TYPES = new Set([
  'application/json',
  'application/xml',
  'application/javascript',
  'application/typescript',
  'application/x-yaml',
  'application/yaml',
  'application/toml',
  'application/x-sh',
  'application/sql',
  'application/x-httpd-php',
  'application/ld+json',
]);

/** Plain text, data and source code people paste as files. */
const TEXT_EXTENSIONS = new Set(
  (
    'txt md markdown rst json jsonl ndjson csv tsv log ini cfg conf toml yaml yml xml html htm css scss ' +
    'js mjs cjs jsx ts tsx py rb go rs java kt kts scala c h cc cpp hpp cs swift m php pl lua r sql sh bash ' +
    'zsh fish ps1 bat dockerfile makefile gradle properties env gitignore diff patch tex vue svelte dart ex exs ' +
    'erl hs clj elm ml fs zig nim proto graphql gql'
  ).split(' '),
);

function extensionOf(name: string): string {
  const base = name.toLowerCase().split('/').at(-1) ?? '';
  const dot = base.lastIndexOf('.');
  // `Dockerfile`, `Makefile`: the whole name is the type.
  return dot < 0 ? base : base.slice(dot + 1);
}

/**
 * First guess from the declared type and the name; the bytes decide in the end (an image must
 * carry an image signature, a text file must be valid UTF-8).
 */
export function classifyAttachment(name: string, contentType: string | undefined): AttachmentKind {
  const type = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  const extension = extensionOf(name);
  if (IMAGE_TYPES.has(type) || (type === '' && IMAGE_EXTENSIONS.has(extension))) return 'image';
  if (type.startsWith('text/') || TEXT_TYPES.has(type) || TEXT_EXTENSIONS.has(extension)) return 'text';
  if ((type === '' || type === 'application/octet-stream') && IMAGE_EXTENSIONS.has(extension)) return 'image';
  return 'binary';
}

/**
 * The text of a file if it is UTF-8 text, else undefined. A NUL byte marks a binary file even
 * when its bytes happen to decode. `cut` says the bytes stop mid-file, so a character split at
 * the end is dropped rather than taken as invalid.
 */
export function decodeUtf8Text(bytes: Uint8Array, options: { cut?: boolean } = {}): string | undefined {
  let end = bytes.length;
  if (options.cut) {
    // Back up over a trailing, incomplete multi-byte sequence (at most 3 continuation bytes).
    let back = 0;
    while (back < 3 && end - back - 1 >= 0 && (bytes[end - back - 1]! & 0xc0) === 0x80) back += 1;
    const lead = bytes[end - back - 1];
    if (lead !== undefined && lead >= 0xc0) {
      const needed = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
      if (back + 1 < needed) end -= back + 1;
    }
  }
  const slice = bytes.subarray(0, end);
  if (slice.includes(0)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(slice);
  } catch {
    return undefined;
  }
}

/** "3 KB", "1.2 MB": sizes as people read them. */
export function formatSize(bytes: number): string {
  if (!Number.isFinite(bytes) || bytes < 0) return 'unknown size';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}
