/** The Discord adapter: discord.js in front of the channel runtime. */
export { connectionProblem, createDiscordClient, destroyClient, type DiscordClientOptions } from './client.js';
export { DiscordAdapter, type DiscordAdapterOptions, type DiscordRuntime } from './discord-adapter.js';
export { decideAccess, shouldReply, type AccessDecision, type AccessSubject, type ReplyTrigger } from './access-policy.js';
export { chunkMessage, DISCORD_MESSAGE_LIMIT } from './chunk-message.js';
export { normalizeMessage, type NormalizedMessage } from './normalize-message.js';
export { SLASH_COMMANDS, registerCommands, handleSlashCommand } from './slash-commands.js';
