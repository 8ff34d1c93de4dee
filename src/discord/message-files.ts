import type { Message } from 'discord.js';
import { attachmentEvent } from '../attachments/attachment-event.js';
import { resolveAttachments, type ResolvedAttachment } from '../attachments/resolve-attachments.js';
import { errorMessage } from '../common/errors.js';
import type { EventStream } from '../common/events.js';
import type { LiveConfig } from '../config/live-config.js';
import type { NormalizedMessage } from './normalize-message.js';

/** What handing a message's files to the model needs. */
export interface MessageFilesContext {
  runtime: {
    attachFiles?(channelId: string, messageId: string, files: readonly ResolvedAttachment[]): unknown;
  };
  config: LiveConfig;
  events: EventStream;
}

/**
 * Downloads the files of a message the bot will answer (within the channel's vision and size
 * limits) once, before its turn, and gives them to the runtime.
 */
export async function attachMessageFiles(context: MessageFilesContext, message: Message, normalized: NormalizedMessage): Promise<void> {
  const { channelId } = normalized.incoming;
  const settings = context.config.settingsFor(channelId, normalized.parentId);
  const files = await resolveAttachments(
    [...message.attachments.values()].map((attachment) => ({
      name: attachment.name,
      size: attachment.size,
      url: attachment.url,
      ...(attachment.contentType ? { contentType: attachment.contentType } : {}),
      ...(attachment.width ? { width: attachment.width } : {}),
      ...(attachment.height ? { height: attachment.height } : {}),
    })),
    { vision: settings.vision, maxImages: settings.maxImagesPerMessage, maxChars: settings.maxAttachmentChars },
  );
  try {
    await context.runtime.attachFiles?.(channelId, message.id, files);
  } catch (error) {
    // The message is still answered; its files stay placeholders.
    context.events.emit({ type: 'attachments_failed', channel_id: channelId, error: errorMessage(error) });
    return;
  }
  context.events.emit(attachmentEvent(channelId, files));
}
