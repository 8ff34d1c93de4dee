/**
 * The fake Discord's public face: the class tests drive, its starter, and the types and ids they
 * share. The parts behind it (gateway, REST, state, payloads) stay inside this folder.
 */
export { FakeDiscord, startFakeDiscord } from './fake-discord.js';
export {
  FAKE_BOT_ID,
  FAKE_GUILD_ID,
  VIEW_CHANNEL,
  type FakeChannel,
  type FakeDiscordOptions,
  type FakeOverwrite,
  type FakeRole,
  type FakeUser,
  type InteractionReply,
  type MessageEdit,
  type PostedMessage,
  type RecordedRequest,
  type SendInteractionOptions,
  type SendMessageOptions,
} from './types.js';
