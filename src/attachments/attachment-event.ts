import type { MagpieEvent } from '../common/events.js';
import type { ResolvedAttachment } from './resolve-attachments.js';

/** One log line per message with files: what the model got, and what it costs. */
export function attachmentEvent(channelId: string, files: readonly ResolvedAttachment[]): MagpieEvent {
  return {
    type: 'attachments_resolved',
    channel_id: channelId,
    images: files.filter((file) => file.kind === 'image').length,
    text_files: files.filter((file) => file.kind === 'text').length,
    placeholders: files.filter((file) => file.kind === 'file').length,
    failed: files.filter((file) => file.kind === 'file' && file.failed).length,
    tokens: files.reduce((sum, file) => sum + (file.kind === 'file' ? 0 : file.tokens), 0),
  };
}

