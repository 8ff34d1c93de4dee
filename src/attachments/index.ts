/** Files attached to messages: what the model can see of them, and what it costs. */
export { classifyAttachment, decodeUtf8Text, formatSize, type AttachmentKind } from './attachment-kind.js';
export { AttachmentStore, ATTACHMENT_MIGRATIONS, type StoredAttachment } from './attachment-store.js';
export { estimateImageTokens, IMAGE_TOKEN_CAP, PIXELS_PER_TOKEN } from '../context/image-tokens.js';
export { sniffImage, type ImageInfo } from './image-info.js';
export {
  MAX_IMAGE_BYTES,
  placeholderOf,
  renderTextFile,
  resolveAttachments,
  type AttachmentSource,
  type ResolveOptions,
  type ResolvedAttachment,
} from './resolve-attachments.js';
export { attachmentEvent } from './attachment-event.js';
